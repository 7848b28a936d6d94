"""start() again: a finished team returns at once (from the store, too, for the same team
defined anew, as in a new process); tasks marked not started run alone, with what the
others produced; a new run never sees the last run's manager turns; fresh=True redoes it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from firm import Agent, Firm, Task, Team, TeamFailed
from firm.testing import ModelServer, ScriptedModel, text
from tests.teams.conftest import pick, two_task_team


def roots(db: Path) -> list[str]:
    with Firm(db) as firm:
        return [t.id for t in firm.tasks() if t.parent_id is None]


def test_a_finished_team_returns_at_once(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(pick("research", "Researcher"), pick("write", "Writer"))
    model.when(agent="researcher").reply(text("Trends."))
    model.when(agent="writer").reply(text("Article."))
    team = two_task_team(db, tmp_path)
    assert team.start() == "Article."
    asked = len(server.requests)

    first = team.run_id
    assert team.start() == "Article."
    again = team.start(return_dict=True)
    assert again["task_results"] == {"research": "Trends.", "write": "Article."}
    # The trace of the run that finished stays, as a new process would read it from the store.
    assert again["run_id"] == first is not None
    assert [t["task_id"] for t in again["manager"]["turns"]] == ["research", "write"]
    assert len(server.requests) == asked  # no model call
    assert len(roots(db)) == 1  # no new run


def test_tasks_marked_not_started_run_alone_and_never_see_the_last_runs_turns(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(
        pick("research", "Researcher"),
        pick("wriet", "Writer"),  # a rejection in the first run's second turn
        pick("write", "Writer"),
        pick("write", "Writer"),  # the second run's only turn
    )
    model.when(agent="researcher").reply(text("Trends."))
    model.when(agent="writer").reply(text("Article."), text("Article, take two."))
    team = two_task_team(db, tmp_path)
    team.start()
    first_run = team.run_id

    team.tasks[1].status = "not started"  # as PraisonAI users do; team.reset("write") too
    assert team.start() == "Article, take two."
    assert team.run_id != first_run
    assert len(server.requests_for("researcher")) == 1  # research was not run again
    second_turn = server.requests_for("manager")[-1]
    brief = second_turn.request.brief
    assert "Turn 1 of at most" in brief
    assert "- research [done (earlier)]: Research AI trends\n  Result: Trends." in brief
    assert "Earlier turns of this run" not in brief  # the first run's turns are not shown
    assert "wriet" not in str(second_turn.body["messages"])
    # The writer still gets the research, carried over from the first run.
    assert "Trends." in server.requests_for("writer")[-1].request.brief
    with Firm(db) as firm:
        tree = firm.subtree(team.run_id or "")
    assert [t.title for t in tree if t.assignee == "manager"] == ["Manager turn 1"]
    assert {t.assignee for t in tree} == {"coordinator", "manager", "writer"}
    assert [t.status for t in team.tasks] == ["done", "done"]
    assert team.tasks[0].output == "Trends."


def test_reset_by_name_and_astart(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="researcher").reply(text("Trends."), text("Newer trends."))
    model.when(agent="writer").reply(text("Article."))
    team = two_task_team(db, tmp_path, process="sequential")
    assert asyncio.run(team.astart()) == "Article."
    team.reset("research")
    out = asyncio.run(team.astart(return_dict=True))
    assert out["task_results"] == {"research": "Newer trends.", "write": "Article."}
    assert len(server.requests_for("writer")) == 1


def test_kickoff_fills_placeholders_from_inputs(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="researcher").reply(text("Notes on robots."))
    researcher = Agent(name="Researcher", role="{topic} researcher")
    team = Team(
        agents=[researcher],
        tasks=[Task("Research {topic} in {year}", agent=researcher)],
        db=db,
        workspace=tmp_path / "ws",
    )
    assert team.kickoff(inputs={"topic": "robots", "year": 2025}) == "Notes on robots."
    (req,) = server.requests
    assert "Research robots in 2025" in req.request.brief
    assert "robots researcher" in req.request.system


def test_start_continues_an_unfinished_run_of_the_same_team(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    from firm.teams.run import submit

    model.when(agent="manager").reply(pick("research", "Researcher"), pick("write", "Writer"))
    model.when(agent="researcher").reply(text("Trends."))
    model.when(agent="writer").reply(text("Article."))
    team = two_task_team(db, tmp_path)
    with Firm(db) as firm:  # a run another process created, then died before working it
        left = submit(firm, team.spec()).id
    assert team.start() == "Article."
    assert team.run_id == left
    assert roots(db) == [left]
    # A team defined differently is another team: it starts its own run.
    other = two_task_team(db, tmp_path, max_iter=5)
    model.when(agent="manager").reply(pick("research", "Researcher"), pick("write", "Writer"))
    model.when(agent="researcher").reply(text("Trends."))
    model.when(agent="writer").reply(text("Article."))
    other.start()
    assert other.run_id != left and len(roots(db)) == 2


def test_hierarchical_tasks_need_no_agent(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(pick("task-1", "Helper"))
    model.when(agent="helper").reply(text("Done it."))
    helper = Agent(name="Helper", role="Does anything")
    team = Team(
        agents=[helper],
        tasks=[Task("Do the thing")],
        process="hierarchical",
        db=db,
        workspace=tmp_path / "ws",
    )
    assert team.start() == "Done it."
    assert "Meant for" not in server.requests_for("manager")[0].request.brief
    assert "- task-1 [not started]: Do the thing" in server.requests_for("manager")[0].request.brief


def test_new_inputs_run_every_task_again(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="researcher", brief_contains="robots").reply(text("Robots."))
    model.when(agent="researcher", brief_contains="boats").reply(text("Boats."))
    researcher = Agent(name="Researcher", role="Researcher")
    team = Team(
        agents=[researcher],
        tasks=[Task("Research {topic}", agent=researcher)],
        db=db,
        workspace=tmp_path / "ws",
    )
    assert team.kickoff(inputs={"topic": "robots"}) == "Robots."
    assert team.kickoff(inputs={"topic": "robots"}) == "Robots."  # the same: at once
    assert team.kickoff(inputs={"topic": "boats"}) == "Boats."
    assert len(server.requests) == 2


def script_run(model: ScriptedModel, research: str = "Trends.", article: str = "Article.") -> None:
    model.when(agent="manager").reply(pick("research", "Researcher"), pick("write", "Writer"))
    model.when(agent="researcher").reply(text(research))
    model.when(agent="writer").reply(text(article))


def test_the_same_team_defined_anew_finds_its_finished_run_in_the_store(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    script_run(model)
    first = two_task_team(db, tmp_path)
    first.start()
    asked = len(server.requests)

    again = two_task_team(db, tmp_path)  # as a new process would: nothing in memory
    out = again.start(return_dict=True)
    assert out["run_id"] == first.run_id == again.run_id
    assert out["task_results"] == {"research": "Trends.", "write": "Article."}
    assert [t["task_id"] for t in out["manager"]["turns"]] == ["research", "write"]
    assert [(t.status, t.output) for t in again.tasks] == [
        ("done", "Trends."),
        ("done", "Article."),
    ]
    assert len(server.requests) == asked and len(roots(db)) == 1
    # Marking a task not started after that still runs it, in a new run.
    model.when(agent="writer").reply(text("Article, take two."))
    model.when(agent="manager").reply(pick("write", "Writer"))
    again.reset("write")
    assert again.start() == "Article, take two."
    assert len(roots(db)) == 2
    # ... and the latest finished run is what the next new definition finds.
    assert two_task_team(db, tmp_path).start() == "Article, take two."
    assert len(roots(db)) == 2


def test_fresh_runs_every_task_again(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    script_run(model)
    team = two_task_team(db, tmp_path)
    team.start()
    first_run = team.run_id

    script_run(model, "New trends.", "New article.")
    assert team.start(fresh=True) == "New article."  # in memory, all done: still redone
    assert team.run_id != first_run
    script_run(model, "Newest trends.", "Newest article.")
    assert two_task_team(db, tmp_path).start(fresh=True) == "Newest article."  # the store too
    assert len(roots(db)) == 3
    assert model.unused() == []


def test_a_failed_run_is_not_taken_for_the_teams_outputs(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(pick("research", "Researcher"), pick("", "", "stop"))
    model.when(agent="researcher").reply(text("Trends."))
    with pytest.raises(TeamFailed):
        two_task_team(db, tmp_path).start()
    script_run(model)
    assert two_task_team(db, tmp_path).start() == "Article."  # a new run, worked to the end
    assert len(roots(db)) == 2


def test_back_to_earlier_inputs_finds_that_run(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="researcher", brief_contains="robots").reply(text("Robots."))
    model.when(agent="researcher", brief_contains="boats").reply(text("Boats."))
    researcher = Agent(name="Researcher", role="Researcher")
    team = Team(
        agents=[researcher],
        tasks=[Task("Research {topic}", agent=researcher)],
        db=db,
        workspace=tmp_path / "ws",
    )
    assert team.kickoff(inputs={"topic": "robots"}) == "Robots."
    assert team.kickoff(inputs={"topic": "boats"}) == "Boats."
    assert team.kickoff(inputs={"topic": "robots"}) == "Robots."  # done before: at once
    assert len(server.requests) == 2
