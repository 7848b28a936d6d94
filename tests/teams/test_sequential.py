"""The sequential process: tasks in order, each given the results before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from firm import Agent, Firm, Task, Team, TeamFailed
from firm.testing import ModelServer, ScriptedModel, calls, complete, fail, text
from tests.teams.conftest import events


def pipeline(db: Path, tmp_path: Path) -> Team:
    analyst = Agent(name="Analyst", role="Data analyst")
    writer = Agent(name="Writer", role="Writer")
    gather = Task(name="gather", description="Gather the sales figures", agent=analyst)
    analyse = Task(name="analyse", description="Find the trend in them", agent=analyst)
    report = Task(
        name="report",
        description="Write the board report",
        expected_output="One page",
        agent=writer,
        context=[gather],  # only the figures, not the analysis
    )
    return Team(
        agents=[analyst, writer],
        tasks=[gather, analyse, report],
        db=db,
        workspace=tmp_path / "ws",
    )


def test_tasks_run_in_order_each_with_the_results_before_it(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="analyst", brief_contains="Gather").reply(text("Q1 10, Q2 12, Q3 15"))
    model.when(agent="analyst", brief_contains="trend").reply(text("Growing 20% a quarter"))
    model.when(agent="writer").reply(calls(complete("The board report: up and to the right.")))
    team = pipeline(db, tmp_path)

    assert team.start() == "The board report: up and to the right."
    order = [r.agent for r in server.requests]
    assert order == ["analyst", "analyst", "writer"]  # no manager in a sequential team
    gather_brief, analyse_brief = (r.request.brief for r in server.requests_for("analyst"))
    assert "Context" not in gather_brief
    assert "### gather (Analyst)\n\nQ1 10, Q2 12, Q3 15" in analyse_brief  # the output before it
    (report,) = server.requests_for("writer")
    assert "Q1 10, Q2 12, Q3 15" in report.request.brief  # its context: gather...
    assert "Growing 20%" not in report.request.brief  # ...and nothing else
    assert "Expected output: One page" in report.request.brief
    with Firm(db) as firm:
        tree = firm.subtree(team.run_id or "")
    assert [t.title.split(":")[0] for t in tree[1:]] == ["gather", "analyse", "report"]
    assert {t.parent_id for t in tree[1:]} == {tree[0].id}
    assert team.start(return_dict=True)["manager"] is None


def test_a_failed_task_is_retried_before_the_next_one_starts(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="analyst", brief_contains="Gather").reply(
        calls(fail("the database timed out")), text("Q1 10")
    )
    model.when(agent="analyst").reply(text("Flat"))
    model.when(agent="writer").reply(text("Report"))
    team = pipeline(db, tmp_path)
    out = team.start(return_dict=True)
    assert out["task_results"] == {"gather": "Q1 10", "analyse": "Flat", "report": "Report"}
    assert [r.agent for r in server.requests] == ["analyst", "analyst", "analyst", "writer"]


def test_a_task_that_fails_four_times_ends_the_run(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="analyst", brief_contains="Gather").reply(text("Q1 10"))
    model.when(agent="analyst").always(calls(fail("no trend in three points")))
    team = pipeline(db, tmp_path)
    with pytest.raises(TeamFailed) as info:
        team.start()
    assert len(server.requests_for("analyst")) == 5  # gather, then analyse 1 + 3 retries
    assert server.requests_for("writer") == []  # never started
    result = info.value.result
    assert result["task_status"] == {"gather": "done", "analyse": "failed", "report": "not started"}
    assert "task analyse could not be done (it failed 4 times): no trend" in result["error"]
    assert [e.data["status"] for e in events(db, "team_ended")] == ["failed"]


def test_a_sequential_team_needs_an_agent_for_every_task(db: Path) -> None:
    a = Agent(name="A", role="Anything")
    with pytest.raises(Exception, match="a sequential team needs an agent for every task"):
        Team(agents=[a], tasks=[Task("Do it")], db=db)
