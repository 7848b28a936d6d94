"""ask_human: the agent's question waits for a person like a call waiting for approval (no
worker held, durable); the answer is the call's result in the agent's next session."""

from __future__ import annotations

import getpass
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.errors import OrgChartError
from firm.events import EventKind
from firm.org import load_org
from firm.store.questions import AlreadyAnswered, QuestionNotFound
from firm.tasks import Status
from firm.testing import ModelRequest, ModelServer, ScriptedModel, call, calls, complete
from tests.humans.conftest import Submit, write_org
from tests.support.cli import SUBPROCESS_GUARD, firm_cli

ANSWERED = "they answered"


def script_question(model: ScriptedModel, question: str = "Which city first?") -> None:
    """The CEO asks a person, then finishes with what the answer said."""

    def finish(req: ModelRequest):  # type: ignore[no-untyped-def]
        line = next(x for x in req.brief.splitlines() if " answered: " in x)
        return calls(complete("launching: " + line.split(" answered: ", 1)[1]))

    model.when(agent="ceo", match=lambda r: ANSWERED not in r.brief).reply(
        calls(call("ask_human", question=question))
    )
    model.when(agent="ceo", brief_contains=ANSWERED).reply(finish)


def _kinds(firm: Firm, *kinds: str) -> list[tuple[str, dict]]:
    return [(e.kind, e.data) for e in firm.events(limit=100_000) if e.kind in kinds]


def test_a_question_waits_for_a_person_and_the_answer_reaches_the_model(
    firm: Firm, model: ScriptedModel, server: ModelServer, submit: Submit
) -> None:
    script_question(model)
    root = submit()
    task = firm.run_until(root, timeout=30)
    assert task.status == Status.WAITING  # the question holds the task, not a worker
    assert firm.engine.running == []
    (q,) = firm.store.questions(status="pending")
    assert (q.task_id, q.agent, q.question) == (root, "ceo", "Which city first?")
    assert firm.store.approvals(status="pending") == []  # a question is not an approval
    first = server.requests_for("ceo")[0].request
    assert "ask_human" in first.tool_names

    answered = firm.store.answer_question(q.id, "alice", "Lisbon, in May.")
    assert (answered.status, answered.answered_by) == ("answered", "alice")
    with pytest.raises(AlreadyAnswered, match="first answer stands"):
        firm.store.answer_question(q.id, "bob", "Berlin")

    done = firm.run_until(root, timeout=30)
    assert done.status == Status.DONE, done.error
    assert done.result == "launching: Lisbon, in May."
    wake = server.requests_for("ceo")[-1].request
    assert "[" + q.id + "] you asked: Which city first?" in wake.brief
    assert "alice answered: Lisbon, in May." in wake.brief
    assert _kinds(firm, EventKind.QUESTION_ASKED, EventKind.QUESTION_ANSWERED) == [
        ("question_asked", {"id": q.id, "question": "Which city first?"}),
        ("question_answered", {"id": q.id, "by": "alice", "answer": "Lisbon, in May."}),
    ]
    report = verify_bundle(firm.export_audit(root), firm.audit_key().public)
    assert report.verified, [c.line() for c in report.checks]


def test_cancel_withdraws_a_waiting_question(
    firm: Firm, model: ScriptedModel, submit: Submit
) -> None:
    script_question(model)
    root = submit()
    assert firm.run_until(root, timeout=30).status == Status.WAITING
    (q,) = firm.store.questions(status="pending")
    firm.cancel(root, "the launch is off")
    assert firm.task(root).status == Status.CANCELLED
    gone = firm.store.get_question(q.id)
    assert gone.status == "withdrawn" and firm.store.questions(status="pending") == []
    with pytest.raises(AlreadyAnswered, match="withdrawn"):
        firm.store.answer_question(q.id, "alice", "Lisbon")
    (withdrawn,) = _kinds(firm, EventKind.QUESTION_WITHDRAWN)
    assert withdrawn[1]["id"] == q.id
    assert _kinds(firm, EventKind.APPROVAL_DECIDED) == []
    report = verify_bundle(firm.export_audit(root), firm.audit_key().public)
    assert report.verified, [c.line() for c in report.checks]


def test_ask_human_is_offered_only_where_the_chart_allows_it(
    firm: Firm, model: ScriptedModel, server: ModelServer, submit: Submit
) -> None:
    model.when(agent="ceo", woken=False).reply(
        calls(call("delegate_task", assignee="eng", title="Pick a colour", description=""))
    )
    model.when(agent="eng", step=0).reply(calls(call("ask_human", question="Blue?")))
    model.when(agent="eng", step=1).reply(
        lambda req: calls(complete("picked blue; " + req.tool_results[-1][:120]))
    )
    model.when(agent="ceo", woken=True).reply(calls(complete("done")))
    root = submit()
    assert firm.run_until(root, timeout=30).status == Status.DONE
    (eng,) = firm.store.children(root)
    assert eng.result is not None and "there is no tool 'ask_human'" in eng.result
    eng_req = server.requests_for("eng")[0].request
    assert "ask_human" not in eng_req.tool_names
    assert firm.store.questions() == []


def test_a_wrong_ask_human_in_the_chart_names_its_line(tmp_path: Path) -> None:
    bad = "company: X\nagents:\n  - id: ceo\n    name: A\n    title: CEO\n    ask_human: maybe\n"
    path = write_org(tmp_path / "co", bad)
    with pytest.raises(OrgChartError) as err:
        load_org(path)
    assert "company.yaml:6" in str(err.value) and "ask_human" in str(err.value)


def test_unknown_questions_are_not_found(firm: Firm) -> None:
    with pytest.raises(QuestionNotFound):
        firm.store.answer_question("Q-00000000", "alice", "yes")


WORKER = """
import sys, time
from firm.api import Firm
firm = Firm(sys.argv[1], heartbeat=0.1)
firm.engine.start()
time.sleep(600)
"""


def test_a_question_survives_a_kill_9_and_is_answered_while_no_engine_runs(
    tmp_path: Path, db: str, model: ScriptedModel, server: ModelServer, org_path: Path
) -> None:
    script_question(model)
    with Firm(db) as firm:
        root = firm.submit(
            org_path, "Launch", brain="llm", brain_options=server.brain_options(timeout=5.0)
        ).id
    worker = subprocess.Popen([sys.executable, "-c", WORKER, db], cwd=tmp_path)
    try:
        with Firm(db) as watcher:
            deadline = time.monotonic() + SUBPROCESS_GUARD
            while watcher.task(root).status != Status.WAITING and time.monotonic() < deadline:
                time.sleep(0.05)
            assert watcher.task(root).status == Status.WAITING
        os.kill(worker.pid, signal.SIGKILL)  # during the wait
        worker.wait(10)
    finally:
        if worker.poll() is None:
            worker.kill()

    # A new engine recovers: the task stays waiting (its question is open), holding no worker.
    with Firm(db, heartbeat=0.1) as firm:
        firm.engine.start()
        time.sleep(0.5)
        assert firm.task(root).status == Status.WAITING
        assert firm.engine.running == []
    assert len(server.requests_for("ceo")) == 1

    # No engine runs while the person answers; the answer takes effect when one starts.
    listed = firm_cli("questions", "--db", db, "--json", cwd=tmp_path, check=True)
    (q,) = json.loads(listed.stdout)
    assert q["question"] == "Which city first?"
    ok = firm_cli("answer", q["id"], "Porto", "--db", db, "--json", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["answered_by"] == getpass.getuser()
    again = firm_cli("answer", q["id"], "Faro", "--db", db, cwd=tmp_path)
    assert again.returncode != 0 and "first answer stands" in again.stderr
    assert "Traceback" not in again.stderr

    with Firm(db, heartbeat=0.1) as firm:
        done = firm.run_until(root, timeout=30)
        assert done.status == Status.DONE, done.error
        assert done.result == "launching: Porto"
    assert f"{getpass.getuser()} answered: Porto" in server.requests_for("ceo")[-1].request.brief


def test_a_manager_woken_by_its_report_sees_its_result_after_a_question_was_answered(
    firm: Firm, model: ScriptedModel, server: ModelServer, submit: Submit
) -> None:
    # Woken twice: by the answer (its session reads what it asked), then by its report's settle
    # (which hands the session the report as that write left it).
    model.when(agent="ceo", match=lambda r: ANSWERED not in r.brief).reply(
        calls(call("ask_human", question="Which city first?"))
    )
    model.when(agent="ceo", brief_contains=ANSWERED, match=lambda r: "mapped" not in r.brief).reply(
        calls(call("delegate_task", assignee="eng", title="Map it", description="Map the city."))
    )
    model.when(agent="eng").reply(calls(complete("mapped Lisbon")))
    model.when(agent="ceo", brief_contains="mapped").reply(calls(complete("launched")))
    root = submit()
    assert firm.run_until(root, timeout=30).status == Status.WAITING
    (q,) = firm.store.questions(status="pending")
    firm.store.answer_question(q.id, "alice", "Lisbon, in May.")
    done = firm.run_until(root, timeout=30)
    assert done.status == Status.DONE, done.error
    delegating, merging = (r.request for r in server.requests_for("ceo")[1:])
    assert "alice answered: Lisbon, in May." in delegating.brief
    assert "mapped Lisbon" in merging.brief
    assert model.unused() == []
