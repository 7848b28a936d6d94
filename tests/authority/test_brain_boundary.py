"""Brains and teams work through the Session protocol: the engine's session implements it,
and no brain reaches the store or the company around it."""

from __future__ import annotations

import ast
from pathlib import Path

import firm
from firm.brains.protocol import Session
from tests.authority.hostile import run_probe

SRC = Path(firm.__file__).parent


def test_the_engine_session_is_a_session_and_brains_see_only_the_protocol(
    tmp_path: Path,
) -> None:
    seen: list[bool] = []

    def script(session: Session) -> None:
        seen.append(isinstance(session, firm.Session))
        session.log("thought", {"text": "logged through the protocol \ud800"})
        assert [t.id for t in session.subtree()] == [session.task_id]
        session.give_up("nothing to do")

    out = run_probe(tmp_path, script)
    assert seen == [True]
    assert out.root.status == "failed" and out.root.error == "nothing to do"
    # give_up went through the checked path: an allowed fail_task call in the log.
    assert [e.data["tool"] for e in out.allowed()] == ["fail_task"]
    assert out.report.verified


def test_no_brain_or_team_module_reaches_the_store_or_the_company_through_a_session() -> None:
    offenders = []
    for path in [*(SRC / "brains").rglob("*.py"), *(SRC / "teams").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("store", "company")
                and isinstance(node.value, ast.Name)
                and node.value.id in ("session", "s")
            ):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno} .{node.attr}")
    assert offenders == []


def test_the_types_a_user_meets_are_exported() -> None:
    for name in ("Brain", "Event", "Session", "SessionCancelled", "ToolResult", "TaskRecord"):
        assert name in firm.__all__ and hasattr(firm, name)
    assert firm.TaskRecord is not firm.Task  # the engine's task and the team's task differ
