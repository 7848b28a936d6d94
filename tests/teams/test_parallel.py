"""Tasks marked async_execution=True run in the background: in a hierarchical team the
manager chooses the next task while they run; in a sequential one consecutive background
tasks start together and the next task waits for them, with their results.

Concurrency is shown by the activity log, never by timing: a worker's model call is held
until the others it should overlap with have arrived (or a timeout passes, which a run that
did one task at a time would hit — and then the log shows the sessions did not overlap)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from firm import Agent, Firm, Task, Team, TeamFailed
from firm.store import open_store
from firm.store.base import Event
from firm.tasks import Status
from firm.teams.decision import DECISION_SCHEMA
from firm.teams.spec import TeamSpec
from firm.testing import (
    ModelRequest,
    ModelServer,
    Reply,
    ScriptedModel,
    calls,
    fail,
    hang,
    text,
)
from tests.support import firm_cli
from tests.teams.conftest import events, pick
from tests.teams.test_cli import bare_env

HOLD = 120.0  # seconds a held call waits for the others before it answers anyway: a hang bound


class Gate:
    """Holds each call until `count` calls have arrived (or HOLD seconds pass)."""

    def __init__(self, count: int):
        self.count = count
        self.arrived = 0
        self.cond = threading.Condition()

    def wait(self) -> None:
        with self.cond:
            self.arrived += 1
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.arrived >= self.count, timeout=HOLD)


def held(gate: Gate, reply: Reply):  # type: ignore[no-untyped-def]
    def answer(req: ModelRequest) -> Reply:
        gate.wait()
        return reply

    return answer


def three_workers(db: Path, tmp_path: Path, process: str, **extra: Any) -> Team:
    workers = [Agent(name=f"W{i}", role=f"Worker {i}") for i in (1, 2, 3)]
    tasks = [
        Task(f"Look into part {i}", agent=w, name=f"t{i}", async_execution=True)
        for i, w in enumerate(workers, 1)
    ]
    return Team(agents=workers, tasks=tasks, process=process, db=db,
                workspace=tmp_path / "ws", **extra)  # fmt: skip


def test_the_engine_is_told_how_many_sessions_start_together(db: Path, tmp_path: Path) -> None:
    # Reader connections are opened ahead for these (engine/scheduler.py), not one a slot.
    assert three_workers(db, tmp_path, "hierarchical").spec().reading_at_once == 2
    assert three_workers(db, tmp_path, "sequential").spec().reading_at_once == 3
    one_at_a_time = three_workers(db, tmp_path, "sequential")
    for t in one_at_a_time.tasks:
        t.async_execution = False
    assert one_at_a_time.spec().reading_at_once == 2


def span(log: list[Event], task_id: str) -> tuple[int, int]:
    """Where a task's session started and where it completed, in the log's order."""
    started = next(e.seq for e in log if e.kind == "started" and e.task_id == task_id)
    ended = next(e.seq for e in log if e.kind == "completed" and e.task_id == task_id)
    return started, ended


def overlapping(spans: list[tuple[int, int]]) -> bool:
    """Every session started before any of them completed."""
    return max(s for s, _ in spans) < min(e for _, e in spans)


def test_the_manager_chooses_the_next_task_while_background_tasks_run(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    gate = Gate(3)
    model.when(agent="manager").reply(pick("t1", "W1"), pick("t2", "W2"), pick("t3", "W3"))
    for i in (1, 2, 3):
        model.when(agent=f"w{i}").reply(held(gate, text(f"part {i} done")))
    team = three_workers(db, tmp_path, "hierarchical")

    out = team.start(return_dict=True)

    assert out["task_results"] == {"t1": "part 1 done", "t2": "part 2 done", "t3": "part 3 done"}
    with Firm(db) as firm:
        tree = firm.subtree(team.run_id or "")
    workers = {t.assignee: t for t in tree if t.assignee.startswith("w")}
    log = events(db)
    # The three tasks ran at once: each session started before any of them completed.
    assert overlapping([span(log, workers[w].id) for w in ("w1", "w2", "w3")])
    # The manager chose t2 and t3 while t1 was running.
    decisions = [e for e in log if e.kind == "manager_decision"]
    assert [d.data["task_id"] for d in decisions] == ["t1", "t2", "t3"]
    assert decisions[-1].seq < span(log, workers["w1"].id)[1]
    # Its answer schema is the same as for any turn: exactly task_id, agent_name, action.
    asked = server.requests_for("manager")
    assert len(asked) == 3
    for r in asked:
        schema = r.body["response_format"]["json_schema"]["schema"]
        assert schema == DECISION_SCHEMA
    # Each later turn is told what runs in the background, and what it may still choose.
    assert "- t1 [running: W1]" in asked[1].request.brief
    assert "- t2 [not started]" in asked[1].request.brief
    assert "Turn 1: t1 → W1: running" in asked[1].request.brief
    assert "does not make you wait" in asked[0].request.system
    # Every choice is a turn in the trace; the three tasks hang under one manager turn.
    turns = out["manager"]["turns"]
    assert [(t["turn"], t["task_id"], t["outcome"]) for t in turns] == [
        (1, "t1", "done"),
        (2, "t2", "done"),
        (3, "t3", "done"),
    ]
    assert all(t["async_execution"] for t in turns)
    assert len({t["task"] for t in turns}) == 1
    assert len(server.requests_for("manager")) == 3  # all done: no fourth turn is asked for


def test_a_task_that_needs_a_running_result_waits_for_it_and_gets_it(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    researcher = Agent(name="Researcher", role="Research")
    analyst = Agent(name="Analyst", role="Numbers")
    writer = Agent(name="Writer", role="Write")
    tasks = [
        Task("Find the trends", agent=researcher, name="trends", async_execution=True),
        Task("Find the figures", agent=analyst, name="figures", async_execution=True),
        Task("Write the report", agent=writer, name="report"),  # waits: it gets both results
    ]
    gate = Gate(2)  # the researcher answers once the analyst has been asked too
    model.when(agent="manager").reply(
        pick("trends", "Researcher"),
        pick("trends", "Analyst"),  # running already: sent back
        pick("figures", "Analyst"),
        pick("report", "Writer"),  # the next turn, once both are in
    )
    model.when(agent="researcher").reply(held(gate, text("Agents are in.")))
    model.when(agent="analyst").reply(held(gate, text("Up 20%.")))
    model.when(agent="writer").reply(text("The report."))
    team = Team(agents=[researcher, analyst, writer], tasks=tasks, process="hierarchical",
                db=db, workspace=tmp_path / "ws")  # fmt: skip

    assert team.start() == "The report."

    asked = server.requests_for("manager")
    second = asked[1].request.brief
    assert "- trends [running: Researcher]" in second
    assert "- report [not started, waits for trends (running)]" in second
    correction = asked[2].body["messages"][-1]["content"]
    assert "task trends is running in the background" in correction
    assert "Tasks you can choose: figures." in correction
    # The report was chosen only once both results were in, and its writer got them both.
    assert "- figures [done by Analyst]" in asked[3].request.brief
    (report,) = server.requests_for("writer")
    assert "Agents are in." in report.request.brief and "Up 20%." in report.request.brief
    log = events(db)
    with Firm(db) as firm:
        by_agent = {t.assignee: t for t in firm.subtree(team.run_id or "")}
    assert overlapping([span(log, by_agent[a].id) for a in ("researcher", "analyst")])
    assert span(log, by_agent["writer"].id)[0] > span(log, by_agent["researcher"].id)[1]


def test_a_failure_in_a_background_task_reaches_the_manager(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(
        pick("t1", "W1"), pick("t2", "W2"), pick("t3", "W3"), pick("t2", "W1")
    )
    model.when(agent="w1").reply(text("part 1 done"), text("part 2, second try"))
    model.when(agent="w2").reply(calls(fail("the archive is offline")))
    model.when(agent="w3").reply(text("part 3 done"))
    team = three_workers(db, tmp_path, "hierarchical")

    out = team.start(return_dict=True)

    asked = server.requests_for("manager")
    assert len(asked) == 4
    retry = asked[3].request.brief
    assert "- t2 [failed 1 time(s), may be tried again]" in retry
    assert "Last failure: the archive is offline" in retry
    assert "Turn 2: t2 → W2: failed" in retry
    assert out["task_results"]["t2"] == "part 2, second try"
    turns = out["manager"]["turns"]
    assert [(t["task_id"], t["outcome"]) for t in turns] == [
        ("t1", "done"),
        ("t2", "failed"),
        ("t3", "done"),
        ("t2", "done"),
    ]
    # The retry is the manager's fourth turn, whether the failure landed while its first
    # session was still choosing (it is asked again in that session) or after (a new one).
    assert [t["turn"] for t in turns] == [1, 2, 3, 4]


def test_sequential_background_tasks_start_together_and_the_next_task_waits_for_them(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    analyst = Agent(name="Analyst", role="Data analyst")
    scout = Agent(name="Scout", role="Market scout")
    writer = Agent(name="Writer", role="Writer")
    tasks = [
        Task("Gather the sales figures", agent=analyst, name="sales", async_execution=True),
        Task("Gather the market news", agent=scout, name="news", async_execution=True),
        Task("Write the board report", agent=writer, name="report"),
    ]
    gate = Gate(2)
    model.when(agent="analyst").reply(held(gate, text("Q1 10, Q2 12")))
    model.when(agent="scout").reply(held(gate, text("A rival launched.")))
    model.when(agent="writer").reply(text("The board report."))
    team = Team(agents=[analyst, scout, writer], tasks=tasks, db=db, workspace=tmp_path / "ws")

    assert team.start() == "The board report."

    (report,) = server.requests_for("writer")
    assert "### sales (Analyst)\n\nQ1 10, Q2 12" in report.request.brief
    assert "### news (Scout)\n\nA rival launched." in report.request.brief
    # The two gathering tasks know nothing of each other's results: they ran together.
    assert "Context" not in server.requests_for("analyst")[0].request.brief
    assert "Context" not in server.requests_for("scout")[0].request.brief
    log = events(db)
    with Firm(db) as firm:
        by_agent = {t.assignee: t for t in firm.subtree(team.run_id or "")}
    sales, news = span(log, by_agent["analyst"].id), span(log, by_agent["scout"].id)
    assert overlapping([sales, news])
    assert span(log, by_agent["writer"].id)[0] > max(sales[1], news[1])


def test_a_sequential_background_task_that_needs_another_starts_after_it(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    a = Agent(name="A", role="Anything")
    first = Task("Draft the outline", agent=a, name="outline", async_execution=True)
    tasks = [
        first,
        Task("Fill in the outline", agent=a, name="fill", async_execution=True, context=[first]),
    ]
    model.when(agent="a", brief_contains="Draft").reply(text("1. Intro 2. Body"))
    model.when(agent="a", brief_contains="Fill").reply(text("Filled."))
    team = Team(agents=[a], tasks=tasks, db=db, workspace=tmp_path / "ws")
    assert team.start() == "Filled."
    fill = server.requests[-1]
    assert "1. Intro 2. Body" in fill.request.brief
    log = events(db)
    with Firm(db) as firm:
        outline, filled = (t for t in firm.subtree(team.run_id or "")[1:])
    assert span(log, filled.id)[0] > span(log, outline.id)[1]


@pytest.mark.parametrize("process", ["sequential", "hierarchical"])
def test_a_team_without_background_tasks_runs_one_task_at_a_time(
    process: str, model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(pick("t1", "W1"), pick("t2", "W2"), pick("t3", "W3"))
    for i in (1, 2, 3):
        model.when(agent=f"w{i}").reply(text(f"part {i} done"))
    workers = [Agent(name=f"W{i}", role=f"Worker {i}") for i in (1, 2, 3)]
    tasks = [Task(f"Look into part {i}", agent=w, name=f"t{i}") for i, w in enumerate(workers, 1)]
    team = Team(agents=workers, tasks=tasks, process=process, db=db, workspace=tmp_path / "ws")
    team.start()
    log = events(db)
    with Firm(db) as firm:
        by_agent = {t.assignee: t for t in firm.subtree(team.run_id or "")}
    spans = [span(log, by_agent[f"w{i}"].id) for i in (1, 2, 3)]
    assert spans[0][1] < spans[1][0] and spans[1][1] < spans[2][0]
    assert "background" not in (server.requests_for("manager") or server.requests)[0].request.system


KILLED_SCRIPT = """\
from firm import Agent, Task, Team

workers = [Agent(name=f"W{i}", role=f"Worker {i}") for i in (1, 2, 3)]
team = Team(
    agents=workers,
    tasks=[Task(f"Look into part {i}", agent=w, name=f"t{i}", async_execution=True)
           for i, w in enumerate(workers, 1)],
    process="hierarchical",
    db="state.db",
)
print(team.start())
"""


def test_a_team_killed_while_background_tasks_run_resumes_without_running_anything_twice(
    model: ScriptedModel, server: ModelServer, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(pick("t1", "W1"), pick("t2", "W2"), pick("t3", "W3"))
    model.when(agent="w1").reply(text("part 1 done"))
    model.when(agent="w2").reply(hang(), text("part 2 done"))  # killed mid-call, then again
    model.when(agent="w3").reply(text("part 3 done"))
    script = tmp_path / "parts.py"
    script.write_text(KILLED_SCRIPT)
    db = tmp_path / "state.db"
    env = bare_env(**server.env())
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert server.wait_until(lambda reqs: any(r.agent == "w2" for r in reqs), 120)
        # w1 and w3 finish while w2's call hangs: kill only once both are recorded done.
        assert wait_for(lambda: done_workers(db) >= {"w1", "w3"}, 120)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    resumed = firm_cli("resume", "--db", "state.db", "--json", cwd=tmp_path, env=bare_env())
    assert resumed.returncode == 0, resumed.stderr
    (summary,) = json.loads(resumed.stdout)
    assert (summary["status"], summary["result"]) == ("done", "part 3 done")
    store = open_store(db)
    try:
        (root,) = [t for t in store.list_tasks() if t.parent_id is None]
        tree = store.subtree(root.id)
        log = store.events_after(0, 100_000)
    finally:
        store.close()
    assert {t.status for t in tree} == {Status.DONE}
    assert Counter(t.assignee for t in tree) == Counter(
        {"coordinator": 1, "manager": 1, "w1": 1, "w2": 1, "w3": 1}
    )
    completed = Counter(e.task_id for e in log if e.kind == "completed")
    assert set(completed) == {t.id for t in tree} and max(completed.values()) == 1
    # Only the call the kill cut off was made again: the manager chose each task once.
    assert Counter(r.agent for r in server.requests) == Counter(
        {"manager": 3, "w1": 1, "w2": 2, "w3": 1}
    )


def test_firm_resume_of_a_team_whose_manager_then_fails_leaves_nothing_running(
    model: ScriptedModel, server: ModelServer, tmp_path: Path
) -> None:
    # Killed while t1 runs in the background and the manager is asked for its next choice;
    # resumed, the manager answers nonsense until its turn fails, which ends the run.
    model.when(agent="manager").reply(pick("t1", "W1"), hang())
    model.when(agent="manager").always(pick("t9", "W2"))
    model.when(agent="w1").always(hang())
    script = tmp_path / "parts.py"
    script.write_text(KILLED_SCRIPT)
    env = bare_env(**server.env())
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert server.wait_until(
            lambda reqs: (
                any(r.agent == "w1" for r in reqs) and sum(r.agent == "manager" for r in reqs) >= 2
            ),
            120,
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)

    resumed = firm_cli("resume", "--db", "state.db", "--json", cwd=tmp_path, env=bare_env())
    (summary,) = json.loads(resumed.stdout)
    assert summary["status"] == "failed", resumed.stderr
    store = open_store(tmp_path / "state.db")
    try:
        (root,) = [t for t in store.list_tasks() if t.parent_id is None]
        tree = store.subtree(root.id)
    finally:
        store.close()
    # t1 was running when the run ended: `firm resume` cancels it rather than leave it
    # open for the next process that opens the store to pick up and run on.
    assert not [t for t in tree if not t.terminal]
    (w1,) = [t for t in tree if t.assignee == "w1"]
    assert w1.status == Status.CANCELLED
    assert "the team's run ended" in (w1.error or "")
    again = firm_cli("resume", "--db", "state.db", cwd=tmp_path, env=bare_env())
    assert "Nothing to resume" in again.stdout


def done_workers(db: Path) -> set[str]:
    if not db.exists():
        return set()
    store = open_store(db)
    try:
        return {t.assignee for t in store.list_tasks() if t.status == Status.DONE}
    finally:
        store.close()


def wait_for(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_async_execution_in_a_tasks_file_is_honoured(tmp_path: Path) -> None:
    (tmp_path / "team.yaml").write_text(
        "process: sequential\n"
        "agents:\n  scout: {role: Scout}\n"
        "tasks:\n"
        "  news: {description: Gather the news, agent: scout, async_execution: true}\n"
        "  digest: {description: Sum it up, agent: scout}\n"
    )
    team = Team.from_yaml(tmp_path / "team.yaml", db=tmp_path / "f.db")
    assert [t.async_execution for t in team.tasks] == [True, False]
    assert [t.async_execution for t in team.spec().tasks] == [True, False]


def test_a_run_stored_before_the_flag_existed_is_still_the_same_team(
    db: Path, tmp_path: Path
) -> None:
    # Unfinished and finished runs are found by the definition's key: a definition stored
    # without async_execution keeps its key, so upgrading firm does not orphan them.
    spec = three_workers(db, tmp_path, "sequential").spec()
    plain = spec.model_copy(
        update={"tasks": [t.model_copy(update={"async_execution": False}) for t in spec.tasks]}
    )
    stored = plain.model_dump(mode="json")
    for task in stored["tasks"]:
        del task["async_execution"]
    assert TeamSpec.model_validate(stored).key() == plain.key()
    assert plain.key() != spec.key()  # marking tasks async is another definition


def test_a_manager_that_fails_while_background_tasks_run_leaves_nothing_running(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(pick("t1", "W1"))
    model.when(agent="manager").always(pick("t9", "W2"))  # no such task, again and again
    model.when(agent="w1").reply(hang())
    team = three_workers(db, tmp_path, "hierarchical")
    with pytest.raises(TeamFailed) as info:
        team.start()
    assert "4 invalid answers in a row" in info.value.result["error"]
    with Firm(db) as firm:
        tree = firm.subtree(team.run_id or "")
    # t1 was running when the run ended: it is cancelled, not left for a later resume.
    assert {(t.assignee, t.status) for t in tree} == {
        ("coordinator", Status.FAILED),
        ("manager", Status.FAILED),
        ("w1", Status.CANCELLED),
    }
    assert "the team's run ended" in (next(t for t in tree if t.assignee == "w1").error or "")
