"""firm.testing.FunctionBrain: one Python function per agent, acting through its session."""

from __future__ import annotations

import textwrap
from pathlib import Path

import firm.testing.function as function_module
from firm.api import Firm
from firm.org import OrgChart
from firm.session import Session
from firm.tasks import Status
from firm.testing import FunctionBrain


def test_functions_delegate_write_and_merge(tmp_path: Path, three_levels: OrgChart) -> None:
    def ceo(session: Session) -> str | None:
        if session.task.turn == 0:
            session.call(
                "delegate_task",
                {"assignee": "cto", "title": "Build", "description": "Build the app."},
            )
            return None
        return "merged: " + ", ".join(t.result or "" for t in session.subtasks)

    def cto(session: Session) -> str | None:
        written = session.call("files_write", {"path": "cto/plan.md", "content": "# Plan"})
        assert written.ok, written.content
        return "planned"

    brain = FunctionBrain({"ceo": ceo, "cto": cto})
    with Firm(tmp_path / "firm.db", brain=brain, heartbeat=0.2) as firm:
        root = firm.run(three_levels, "Launch", workspace=tmp_path / "ws", timeout=60)
        calls = [e.data["tool"] for e in firm.events(limit=1000) if e.kind == "tool_call"]
    assert root.status == Status.DONE and root.result == "merged: planned"
    assert (tmp_path / "ws" / "cto" / "plan.md").read_text() == "# Plan"
    # The checked, logged path. Each entry is written with its session's next write: the
    # CEO's settle and the CTO's race (the CTO starts once the delegation commits).
    assert sorted(calls) == ["delegate_task", "files.write"]
    assert brain.sessions_of() == [("ceo", 0), ("cto", 0), ("ceo", 1)]
    assert brain.sessions_of("cto") == [("cto", 0)]


def test_an_agent_without_a_function_fails_saying_so(
    tmp_path: Path, three_levels: OrgChart
) -> None:
    with Firm(tmp_path / "firm.db", brain=FunctionBrain({}), heartbeat=0.2) as firm:
        root = firm.run(three_levels, "Launch", workspace=tmp_path / "ws", timeout=60)
    assert root.status == Status.FAILED
    assert "no function for agent 'ceo'" in (root.error or "")


def test_the_docstring_example_runs(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    doc = function_module.__doc__ or ""
    example = doc.split("\n\n    from firm import", 1)[1].split("\n\nSee docs")[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(textwrap.dedent("    from firm import" + example), "doc", "exec"), {})
