"""The hierarchical process: the manager chooses, firm checks, the chosen agent works —
every manager turn and every team task a firm task of its own."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from firm import Firm, TeamFailed
from firm.tasks import Status
from firm.testing import ModelServer, ScriptedModel, calls, complete, error, fail, hang, text
from tests.teams.conftest import STOP, events, pick, two_task_team

ARTICLE = "AI agents are everywhere.\n\nSmall models got good.\n\nWatch this space."


def script_happy_path(model: ScriptedModel) -> None:
    model.when(agent="manager").reply(pick("research", "Researcher"), pick("write", "Writer"))
    model.when(agent="researcher").reply(text("Trends: agents, small models."))
    model.when(agent="writer").reply(calls(complete(ARTICLE)))


def test_the_manager_chooses_and_the_agents_do_the_tasks(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    script_happy_path(model)
    team = two_task_team(db, tmp_path)

    assert team.start() == ARTICLE  # the last task's raw output, never the manager's text
    assert [t.status for t in team.tasks] == ["done", "done"]
    assert team.tasks[0].output == "Trends: agents, small models."

    # Every manager turn and every team task is a firm task, in one tree.
    with Firm(db) as firm:
        tree = firm.subtree(team.run_id or "")
    root, turns = tree[0], [t for t in tree if t.assignee == "manager"]
    assert (root.assignee, root.status, root.result) == ("coordinator", Status.DONE, ARTICLE)
    assert [t.title for t in turns] == ["Manager turn 1", "Manager turn 2"]
    assert all(t.parent_id == root.id and t.status == Status.DONE for t in turns)
    workers = {t.assignee: t for t in tree if t.parent_id in {turn.id for turn in turns}}
    assert workers["researcher"].parent_id == turns[0].id
    assert workers["writer"].parent_id == turns[1].id
    assert workers["writer"].title == "write: Write an article on the research"
    # Two turns were enough: with every task done, the coordinator ends without asking.
    assert len(server.requests_for("manager")) == 2
    assert model.unused() == []


def test_each_turn_asks_for_a_strict_decision_with_only_the_managers_tools(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    script_happy_path(model)
    two_task_team(db, tmp_path).start()
    first, second = server.requests_for("manager")
    fmt = first.body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["task_id", "agent_name", "action"]
    assert "tools" not in first.body  # no tools of its own: nothing to call, just decide
    assert "Researcher — Research topics" in first.request.system
    assert "- research [not started]" in first.request.brief
    # The next turn shows what the last one did, and the result it produced.
    assert "- research [done by Researcher]" in second.request.brief
    assert "Result: Trends: agents, small models." in second.request.brief
    assert "Turn 1: research → Researcher: done" in second.request.brief
    # Workers are ordinary agents: no response format; the research reaches the writer.
    (writer,) = server.requests_for("writer")
    assert "response_format" not in writer.body
    assert "Trends: agents, small models." in writer.request.brief
    assert "Expected output: Three paragraphs" in writer.request.brief


def test_return_dict_gives_every_output_by_id_and_the_manager_trace(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    # The manager runs the last task first: the return value is still the last task's.
    model.when(agent="manager").reply(pick("write", "Writer"), pick("research", "Researcher"))
    model.when(agent="writer").reply(text(ARTICLE))
    model.when(agent="researcher").reply(text("Trends."))
    team = two_task_team(db, tmp_path)
    out = team.start(return_dict=True)
    assert out["status"] == "done" and out["run_id"] == team.run_id
    assert out["task_results"] == {"research": "Trends.", "write": ARTICLE}
    assert out["task_status"] == {"research": "done", "write": "done"}
    manager = out["manager"]
    assert manager["status"] == "completed"
    assert [(t["turn"], t["action"], t["task_id"], t["agent_name"], t["outcome"])
            for t in manager["turns"]] == [
        (1, "execute", "write", "Writer", "done"),
        (2, "execute", "research", "Researcher", "done"),
    ]  # fmt: skip
    assert team.result == out
    assert two_task_team(db, tmp_path).tasks[-1].name == "write"


def test_an_invalid_choice_is_sent_back_with_the_valid_ones(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    def own_turn(req):  # type: ignore[no-untyped-def]
        return pick(req.task_id, "Researcher")

    model.when(agent="manager").reply(
        pick("summarise", "Researcher"),
        own_turn,
        pick("research", "Manager"),  # the third re-prompt follows; a fourth would not
        pick("research", " 'researcher' "),
        pick("write", "Bob"),  # a valid answer in between: "in a row" starts again
        pick("write", "WRITER"),
    )
    model.when(agent="researcher").reply(text("Trends."))
    model.when(agent="writer").reply(text(ARTICLE))
    team = two_task_team(db, tmp_path)
    assert team.start() == ARTICLE

    asked = server.requests_for("manager")
    corrections = [r.body["messages"][-1]["content"] for r in asked[1:4]]
    assert "Rejected: there is no task 'summarise'" in corrections[0]
    assert "is your own turn, not a team task" in corrections[1]
    assert "you are the manager and cannot do a task yourself" in corrections[2]
    for c in corrections:
        assert "Tasks you can choose: research, write. Team members: Researcher, Writer." in c
    # The re-prompt is a conversation: the model sees its own wrong answer before the reason.
    assert asked[1].body["messages"][-2] == {
        "role": "assistant",
        "content": json.dumps(
            {"task_id": "summarise", "agent_name": "Researcher", "action": "execute"}
        ),
    }
    assert "there is no team member 'Bob'" in asked[5].body["messages"][-1]["content"]
    assert "Tasks you can choose: write." in asked[5].body["messages"][-1]["content"]
    rejected = [e for e in events(db, "manager_decision") if e.data["verdict"] == "rejected"]
    assert [e.data["turn"] for e in rejected] == [1, 1, 1, 2]
    assert rejected[0].data["answer"].startswith('{"task_id": "summarise"')
    assert team.result is not None
    assert [len(t.get("rejected", [])) for t in team.result["manager"]["turns"]] == [3, 1]


def test_four_invalid_answers_in_a_row_end_the_run_with_the_manager_failed(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").always(pick("research", "Nobody"))
    team = two_task_team(db, tmp_path)
    with pytest.raises(TeamFailed) as info:
        team.start()
    assert len(server.requests_for("manager")) == 4  # the answer, then three re-prompts
    assert server.requests_for("researcher") == []
    result = info.value.result
    assert result["status"] == "failed"
    assert result["manager"]["status"] == "failed"
    assert "the manager gave 4 invalid answers in a row" in result["error"]
    assert "there is no team member 'Nobody'" in result["error"]
    (turn,) = result["manager"]["turns"]
    assert turn["status"] == "failed"
    ended = events(db, "team_ended")
    assert [e.data["status"] for e in ended] == ["failed"]
    assert "4 invalid answers in a row" in ended[0].data["reason"]
    assert [t.status for t in team.tasks] == ["not started", "not started"]


def test_reselecting_a_done_task_is_logged_and_ignored(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(
        pick("research", "Researcher"), pick("RESEARCH", "Writer"), pick("write", "Writer")
    )
    model.when(agent="researcher").reply(text("Trends."))
    model.when(agent="writer").reply(text(ARTICLE))
    team = two_task_team(db, tmp_path)
    out = team.start(return_dict=True)

    assert len(server.requests_for("researcher")) == 1  # never run twice
    completed = [e.agent for e in events(db, "completed")]
    assert completed.count("researcher") == 1 and completed.count("writer") == 1
    assert out["task_results"]["research"] == "Trends."
    turns = out["manager"]["turns"]
    assert [t["action"] for t in turns] == ["execute", "reselected", "execute"]
    assert turns[1]["note"] == "research is already done; it was not run again"
    logged = [e.data for e in events(db, "manager_decision") if e.data["verdict"] == "reselected"]
    assert logged == [
        {
            "turn": 2,
            "verdict": "reselected",
            "task_id": "research",
            "agent_name": "Writer",
            "reason": "research is already done; it was not run again",
        }
    ]
    assert "Turn 2: research is already done; it was not run again" in (
        server.requests_for("manager")[2].request.brief
    )


def test_a_failing_task_is_retried_three_times_then_excluded_and_the_run_goes_on(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(
        *[pick("research", "Researcher")] * 5,  # the fifth is refused: research is excluded
        pick("write", "Writer"),
    )
    model.when(agent="researcher").always(calls(fail("the sources are down")))
    model.when(agent="writer").reply(text(ARTICLE))
    team = two_task_team(db, tmp_path)
    with pytest.raises(TeamFailed) as info:
        team.start()

    assert len(server.requests_for("researcher")) == 4  # one attempt and three retries
    assert len(server.requests_for("writer")) == 1  # the run went on without research
    refused = server.requests_for("manager")[5].body["messages"][-1]["content"]
    assert "task research is excluded (it failed 4 times" in refused
    assert "Tasks you can choose: write." in refused
    result = info.value.result
    assert result["task_status"] == {"research": "failed", "write": "done"}
    assert result["task_results"] == {"research": None, "write": ARTICLE}
    assert result["manager"]["status"] == "failed"
    assert "research could not be done" in result["error"]
    assert [t.status for t in team.tasks] == ["failed", "done"]
    (excluded,) = events(db, "team_task_excluded")
    assert excluded.data == {"task_id": "research", "failures": 4, "reason": "the sources are down"}
    # The brief of the 4th attempt's turn said how often it had failed, and why.
    assert "failed 3 time(s), may be tried again" in server.requests_for("manager")[3].request.brief
    assert "Last failure: the sources are down" in server.requests_for("manager")[3].request.brief


def test_max_iter_bounds_the_managers_turns(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(pick("research", "Researcher"))
    model.when(agent="manager").always(pick("research", "Researcher"))  # reselects, forever
    model.when(agent="researcher").reply(text("Trends."))
    team = two_task_team(db, tmp_path, max_iter=3)
    with pytest.raises(TeamFailed) as info:
        team.start()
    assert len(server.requests_for("manager")) == 3
    assert "Turn 3 of at most 3" in server.requests_for("manager")[2].request.brief
    result = info.value.result
    assert result["manager"]["status"] == "failed"
    assert "it used all 3 turns (max_iter) with task(s) not done: write" in result["error"]
    assert result["task_status"] == {"research": "done", "write": "not started"}


def test_stopping_before_every_task_is_done_reports_the_manager_failed(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(pick("research", "Researcher"), STOP)
    model.when(agent="researcher").reply(text("Trends."))
    team = two_task_team(db, tmp_path)
    with pytest.raises(TeamFailed) as info:
        team.start()
    result = info.value.result
    assert result["status"] == "failed"
    assert result["manager"]["status"] == "failed"  # never "completed"
    assert "it stopped in turn 2 with task(s) not done: write" in result["error"]
    assert result["manager"]["turns"][1]["action"] == "stop"
    assert result["task_results"]["research"] == "Trends."
    with Firm(db) as firm:
        assert firm.task(team.run_id or "").status == Status.FAILED


def test_a_manager_whose_model_fails_for_good_fails_the_run(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    # A 400 about something else than the response format is not worked around.
    model.when(agent="manager").reply(error(400, "max_tokens is too large for this model"))
    team = two_task_team(db, tmp_path)
    with pytest.raises(TeamFailed) as info:
        team.start()
    assert "the manager failed in turn 1" in info.value.result["error"]
    assert "max_tokens is too large" in info.value.result["error"]
    assert len(server.requests_for("manager")) == 1


def test_cancelling_the_run_stops_everything_mid_task(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(pick("research", "Researcher"))
    model.when(agent="researcher").reply(hang())
    team = two_task_team(db, tmp_path)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            team.start()
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert server.wait_until(lambda reqs: any(r.agent == "researcher" for r in reqs))
    with Firm(db) as firm:
        cancelled = [firm.task(t) for t in firm.cancel(team.run_id or "", "changed my mind")]
    thread.join(30)
    assert not thread.is_alive()
    assert {t.assignee for t in cancelled} == {"coordinator", "manager", "researcher"}
    (exc,) = failure
    assert isinstance(exc, TeamFailed)
    assert exc.result["status"] == "cancelled"
    assert exc.reason == "changed my mind"


def test_verbose_output_prints_each_decision(
    model: ScriptedModel,
    server: ModelServer,
    db: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model.when(agent="manager").reply(
        pick("research", "Researcher"), pick("draft", "Writer"), pick("write", "Writer")
    )
    model.when(agent="researcher").reply(text("Trends."))
    model.when(agent="writer").reply(text(ARTICLE))
    two_task_team(db, tmp_path, output="verbose").start()
    out = capsys.readouterr().out
    assert "[manager] turn 1: research → Researcher" in out
    assert "[manager] turn 2: Rejected: there is no task 'draft'" in out
    assert "[manager] turn 2: write → Writer" in out
    assert "[Writer] completed" in out
    assert out.rstrip().endswith("[team] done")


def test_the_trace_is_json_in_each_turns_result(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    script_happy_path(model)
    team = two_task_team(db, tmp_path)
    team.start()
    with Firm(db) as firm:
        turns = [t for t in firm.subtree(team.run_id or "") if t.assignee == "manager"]
    record = json.loads(turns[0].result or "")
    assert record["action"] == "execute" and record["task_id"] == "research"
    assert record["outcome"] == "done"


def test_cancelling_one_team_task_excludes_it_and_the_run_goes_on(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(pick("research", "Researcher"), pick("write", "Writer"))
    model.when(agent="researcher").reply(hang())
    model.when(agent="writer").reply(text(ARTICLE))
    team = two_task_team(db, tmp_path)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            team.start()
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert server.wait_until(lambda reqs: any(r.agent == "researcher" for r in reqs))
    with Firm(db) as firm:
        (research,) = firm.tasks(assignee="researcher")
        firm.cancel(research.id, "not needed")
    thread.join(30)
    (exc,) = failure
    assert isinstance(exc, TeamFailed)
    result = exc.result
    assert result["task_results"] == {"research": None, "write": ARTICLE}
    assert "research could not be done" in result["error"]
    assert "cancelled" in server.requests_for("manager")[1].request.brief
