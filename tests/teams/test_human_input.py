"""Task(human_input=True): a person accepts the task's output or sends it back to its agent
with feedback — a question in firm's own machinery, so the run waits holding no worker."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from firm import Agent, Firm, Task, Team
from firm.audit.verify import verify_bundle
from firm.store.questions import Question
from firm.tasks import Task as FirmTask
from firm.testing import ModelServer, ScriptedModel, calls, complete, text
from tests.teams.conftest import STOP, events, pick


def _team(db: Path, tmp_path: Path, **options: Any) -> Team:
    researcher = Agent(name="Researcher", role="Research topics")
    writer = Agent(name="Writer", role="Write content")
    tasks = [
        Task(name="research", description="Research AI trends", agent=researcher),
        Task(
            name="write",
            description="Write an article on the research",
            agent=writer,
            human_input=True,
        ),
    ]
    return Team(
        agents=[researcher, writer], tasks=tasks, db=db, workspace=tmp_path / "ws", **options
    )


def _next_question(db: Path, answered: set[str], timeout: float = 60) -> Question:
    deadline = time.monotonic() + timeout
    with Firm(db) as firm:
        while time.monotonic() < deadline:
            waiting = [q for q in firm.store.questions(status="pending") if q.id not in answered]
            if waiting:
                return waiting[0]
            time.sleep(0.05)
    raise AssertionError("no question was asked")


def _status_becomes(db: Path, task_id: str, status: str, timeout: float = 60) -> FirmTask:
    """The task once it has this status (the deadline only bounds a hang)."""
    deadline = time.monotonic() + timeout
    with Firm(db) as firm:
        while (task := firm.task(task_id)).status != status:
            assert time.monotonic() < deadline, f"{task_id} stayed {task.status}"
            time.sleep(0.05)
    return task


def _answer(db: Path, q: Question, answer: str) -> None:
    with Firm(db) as firm:
        firm.store.answer_question(q.id, "alice", answer)


def _start_in_background(team: Team) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["output"] = team.start()
        except BaseException as exc:  # the test thread reports it
            box["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    return t, box


def _review_round_trip(db: Path, tmp_path: Path, server: ModelServer, team: Team) -> None:
    runner, box = _start_in_background(team)
    try:
        first = _next_question(db, set())
        assert first.question.startswith("[review T-")
        assert "'write'" in first.question and "Robots are coming." in first.question
        # The question is recorded during the coordinator's session; its task waits once that
        # session has settled, a moment later (longer on a loaded machine).
        waiting = _status_becomes(db, first.task_id, "waiting")
        assert waiting.worker_id is None and waiting.lease_expires_at is None  # no worker held
        _answer(db, first, "Too gloomy: end on a hopeful note.")

        second = _next_question(db, {first.id})
        assert "Robots are coming, and they will help." in second.question
        _answer(db, second, "accept")
    finally:
        runner.join(120)
    assert "error" not in box, box.get("error")
    assert box["output"] == "Robots are coming, and they will help."
    assert team.tasks[1].output == "Robots are coming, and they will help."

    first_try, second_try = (r.request.brief for r in server.requests_for("writer"))
    assert "sent it back" not in first_try
    assert "### The earlier output\n\nRobots are coming." in second_try
    assert "### Their feedback\n\nToo gloomy: end on a hopeful note." in second_try
    answers = [e.data["answer"] for e in events(db, "question_answered")]
    assert answers == ["Too gloomy: end on a hopeful note.", "accept"]
    with Firm(db) as firm:
        report = verify_bundle(firm.export_audit(team.run_id or ""), firm.audit_key().public)
    assert report.verified, [c.line() for c in report.checks]


def test_sequential_feedback_sends_the_task_back_and_acceptance_delivers(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="researcher").reply(text("AI is everywhere"))
    model.when(agent="writer", match=lambda r: "sent it back" not in r.brief).reply(
        calls(complete("Robots are coming."))
    )
    model.when(agent="writer", brief_contains="sent it back").reply(
        calls(complete("Robots are coming, and they will help."))
    )
    team = _team(db, tmp_path)
    _review_round_trip(db, tmp_path, server, team)
    assert [r.agent for r in server.requests] == ["researcher", "writer", "writer"]
    assert team.start() == "Robots are coming, and they will help."  # done: no model call
    assert len(server.requests) == 3


def test_hierarchical_feedback_goes_back_through_the_manager(
    model: ScriptedModel, server: ModelServer, db: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(
        pick("research", "Researcher"), pick("write", "Writer"), pick("write", "Writer"), STOP
    )
    model.when(agent="researcher").reply(text("AI is everywhere"))
    model.when(agent="writer", match=lambda r: "sent it back" not in r.brief).reply(
        calls(complete("Robots are coming."))
    )
    model.when(agent="writer", brief_contains="sent it back").reply(
        calls(complete("Robots are coming, and they will help."))
    )
    team = _team(db, tmp_path, process="hierarchical")
    _review_round_trip(db, tmp_path, server, team)
    turns = team.result["manager"]["turns"] if team.result else []
    assert [t.get("task_id") for t in turns] == ["research", "write", "write"]
