"""Which model each agent calls, where the requests go, and a manager that holds tools."""

from __future__ import annotations

from pathlib import Path

import pytest

import firm
from firm import Agent, Firm, FirmError, Task, Team
from firm.testing import ModelServer, ScriptedModel, call, calls, text
from tests.teams.conftest import pick, two_task_team


@firm.tool("notes.count")
def count_words(text: str) -> str:
    """Count the words in a text."""
    return str(len(text.split()))


def test_an_agent_may_be_given_tool_functions(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="counter", step=0).reply(calls(call("notes_count", text="one two three")))
    model.when(agent="counter", step=1).reply(text("Three words."))
    counter = Agent(name="Counter", role="Counts", tools=[count_words])
    team = Team(
        agents=[counter],
        tasks=[Task("Count the words", agent=counter)],
        db=db,
        workspace=tmp_path / "ws",
    )
    assert team.spec().tool_modules == [__name__]
    assert team.start() == "Three words."
    first, second = server.requests_for("counter")
    offered = [t["function"]["name"] for t in first.body["tools"]]
    assert offered == ["complete_task", "fail_task", "notes_count"]
    assert second.request.tool_results == ["3"]
    with pytest.raises(FirmError, match="is not a firm tool"):
        Agent(name="X", role="x", tools=[len]) and Team(
            agents=[Agent(name="X", role="x", tools=[len])],
            tasks=[Task("t")],
            process="hierarchical",
        )


def script(model: ScriptedModel) -> None:
    model.when(agent="manager").reply(pick("research", "Researcher"), pick("write", "Writer"))
    model.when(agent="researcher").reply(text("Trends."))
    model.when(agent="writer").reply(text("Article."))


def models_used(server: ModelServer, since: int = 0) -> dict[str | None, set[str]]:
    used: dict[str | None, set[str]] = {}
    for r in server.requests[since:]:
        used.setdefault(r.agent, set()).add(r.body["model"])
    return used


def test_the_agents_model_then_the_teams_then_the_managers_own(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("FIRM_MODEL", "env-model")  # named elsewhere, so not used
    script(model)
    team = two_task_team(db, tmp_path, llm="team-model", manager_llm="openai/boss-model")
    team.agents[0].llm = "agent-model"
    team.start()
    assert models_used(server) == {
        "manager": {"boss-model"},  # CrewAI's provider prefix is dropped
        "researcher": {"agent-model"},
        "writer": {"team-model"},
    }
    assert {r.headers["authorization"] for r in server.requests} == {"Bearer sk-team-test"}


def test_firm_model_then_the_documented_default(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path, monkeypatch
) -> None:
    script(model)
    monkeypatch.setenv("FIRM_MODEL", "env-model")
    two_task_team(db, tmp_path).start()
    assert models_used(server) == {a: {"env-model"} for a in ("manager", "researcher", "writer")}

    since = len(server.requests)
    script(model)
    monkeypatch.delenv("FIRM_MODEL")
    two_task_team(db, tmp_path, name="Another").start()
    agents = ("manager", "researcher", "writer")
    assert models_used(server, since) == {a: {"gpt-4o-mini"} for a in agents}


def test_no_endpoint_and_no_key_is_one_clear_error_before_anything_starts(
    db: Path, tmp_path: Path
) -> None:
    team = two_task_team(db, tmp_path)
    with pytest.raises(FirmError, match="OPENAI_API_KEY is not set"):
        team.start()
    with Firm(db) as firm:
        assert firm.tasks() == []


def test_a_manager_may_use_its_own_tools_and_only_those(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "priorities.md").write_text("Writing first, then research.")
    model.when(agent="lead", step=0).reply(
        calls(
            call("complete_task", result="I'll just finish"),
            call("files_read", path="priorities.md"),
        )
    )
    model.when(agent="lead", step=1).reply(pick("write", "Writer"))
    model.when(agent="lead").reply(pick("research", "Researcher"))
    model.when(agent="researcher").reply(text("Trends."))
    model.when(agent="writer").reply(text("Article."))
    lead = Agent(name="Lead", role="Editor in chief", tools=["files.read"])
    team = two_task_team(db, tmp_path, manager=lead)
    assert team.start() == "Article."

    first, second = server.requests_for("lead")[:2]
    assert [t["function"]["name"] for t in first.body["tools"]] == ["files_read"]
    assert "files_read" in first.request.system
    refused, read = second.request.tool_results
    assert refused.startswith("error: there is no tool 'complete_task' here")
    assert read == "Writing first, then research."
    assert team.result is not None
    assert [t["task_id"] for t in team.result["manager"]["turns"]] == ["write", "research"]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"process": "parallel"}, "process must be 'sequential' or 'hierarchical'"),
        ({"manager_output": "xml"}, "manager_output must be"),
        ({"max_iter": 0}, "max_iter must be at least 1"),
        ({"grant": ["files..read"]}, "is not a tool name or glob"),
        ({"llm": {"model": "x", "temprature": 1}}, "llm: not valid llm settings"),
    ],
)
def test_a_wrong_setting_is_reported_when_the_team_is_made(
    db: Path, tmp_path: Path, options: dict, says: str
) -> None:
    with pytest.raises(FirmError, match=says):
        two_task_team(db, tmp_path, **options)


def test_names_the_manager_could_not_tell_apart_are_refused(db: Path) -> None:
    a, b = Agent(name="Senior Writer", role="x"), Agent(name="senior  writer", role="y")
    with pytest.raises(FirmError, match="cannot be told apart"):
        Team(agents=[a, b], tasks=[Task("t", agent=a)], db=db)
    c = Agent(name="Coordinator", role="z")
    with pytest.raises(FirmError, match="taken by the team's coordinator"):
        Team(agents=[c], tasks=[Task("t", agent=c)], db=db)
    boss = Agent(name="Writer", role="boss")
    w = Agent(name="writer", role="w")
    with pytest.raises(FirmError, match="cannot be told apart"):
        Team(agents=[w], tasks=[Task("t")], process="hierarchical", manager=boss, db=db)
