"""A team's authority: a worker never runs a tool its delegator's grant does not cover —
the manager's own tools, plus what the team's grant hands down.

The generated chart expresses the rule; grants derived on delegation enforce it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from firm import Agent, Task, Team
from firm.testing import ModelServer, ScriptedModel, call, calls, complete
from tests.teams.conftest import events, pick


def team(db: Path, tmp_path: Path, process: str, grant: list[str] | None) -> Team:
    lead = Agent(name="Lead", role="Editor", tools=["files.read"])
    writer = Agent(name="Writer", role="Writer", tools=["files.*"])
    return Team(
        agents=[writer],
        tasks=[Task("Write notes.md", agent=writer, name="notes")],
        process=process,
        manager=lead,
        grant=grant,
        db=db,
        workspace=tmp_path / "ws",
    )


def test_the_chart_hands_down_the_managers_tools_and_the_teams_grant(
    db: Path, tmp_path: Path
) -> None:
    chart = team(db, tmp_path, "hierarchical", ["files.list"]).spec().org_chart()
    assert chart.agent("coordinator").tools == []
    assert chart.agent("coordinator").can_grant == ["files.read", "files.list"]
    assert chart.agent("lead").reports_to == "coordinator"
    assert (chart.agent("lead").tools, chart.agent("lead").can_grant) == (
        ["files.read"],
        ["files.list"],
    )
    assert chart.agent("writer").reports_to == "lead"
    assert chart.agent("writer").tools == ["files.*"]
    assert chart.default_tools == []
    # Without a grant the team hands down what its agents declare.
    default = team(db, tmp_path, "hierarchical", None).spec().org_chart()
    assert default.agent("lead").can_grant == ["files.*", "files.read"]
    sequential = team(db, tmp_path, "sequential", ["files.list"]).spec().org_chart()
    assert sequential.agent("writer").reports_to == "coordinator"
    assert sequential.agent("coordinator").can_grant == ["files.list"]


def script_writer(model: ScriptedModel) -> None:
    model.when(agent="lead").reply(pick("notes", "Writer"))
    model.when(agent="writer", step=0).reply(
        calls(call("files_write", path="notes.md", content="hi"), call("files_list", path="."))
    )
    model.when(agent="writer", step=1).reply(calls(complete("Notes written.")))


@pytest.mark.parametrize("process", ["hierarchical", "sequential"])
def test_a_worker_cannot_use_a_tool_its_delegator_does_not_hold(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path, process: str
) -> None:
    script_writer(model)
    # The manager holds files.read; the team grants files.list on top; the writer declares
    # files.* — but files.write reaches it from nowhere.
    assert team(db, tmp_path, process, ["files.list"]).start() == "Notes written."
    (first, _) = server.requests_for("writer")
    offered = {t["function"]["name"] for t in first.body["tools"]}
    assert "files_write" not in offered and "files_list" in offered
    denied = [e.data for e in events(db, "tool_denied") if e.agent == "writer"]
    assert [(d["tool"], d["code"]) for d in denied] == [("files.write", "scope_not_granted")]
    allowed = [e.data["tool"] for e in events(db, "tool_call") if e.agent == "writer"]
    assert "files.list" in allowed
    assert not (tmp_path / "ws" / "notes.md").exists()


def test_the_teams_grant_lets_a_worker_use_more_than_the_manager_holds(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    script_writer(model)
    team(db, tmp_path, "hierarchical", ["files.write", "files.list"]).start()
    assert (tmp_path / "ws" / "notes.md").read_text() == "hi"
    assert [e for e in events(db, "tool_denied") if e.agent == "writer"] == []
