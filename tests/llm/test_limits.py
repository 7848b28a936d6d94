"""Bounds on a session: the iteration cap and the token budget of its grant."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

from firm.api import Firm
from firm.org import OrgChart, parse_org
from firm.session import Session
from firm.tasks import Status
from firm.testing import FunctionBrain, ModelServer, ScriptedModel, call, calls, complete, delegate
from tests.support import events_of

from .conftest import Runner

LIST = calls(call("files_list"))
ORG = "company: Co\nagents:\n  - {id: ceo, name: Ceo, title: Chief Executive Officer}\n"


def test_the_iteration_cap_fails_the_task_with_a_clear_reason(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    model.when(agent="gabriel").always(LIST)  # never finishes
    root = run_llm(three_levels, to="gabriel", max_iterations=3)

    assert root.status == Status.FAILED
    assert "reached its limit of 3 model calls" in (root.error or "")
    assert "max_iterations" in (root.error or "")
    assert len(server.requests) == 3


def test_the_cap_after_delegating_ends_the_turn_instead(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    model.when(agent="cto", woken=False, step=0).reply(
        calls(delegate("gabriel", "Build the API"), call("files_list"))
    )
    model.when(agent="cto", woken=False).always(LIST)
    model.when(agent="gabriel").reply(calls(complete("built")))
    model.when(agent="cto", woken=True).reply(calls(complete("done")))
    root = run_llm(three_levels, to="cto", max_iterations=2)
    assert root.status == Status.DONE, root.error


def test_a_session_that_would_exceed_its_budget_stops(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, firm: Firm, run_llm: Runner
) -> None:
    # The first answer reports 900 of the 1000 tokens used: the next call cannot fit.
    model.when(agent="gabriel").reply(replace(LIST, usage=(800, 100)), calls(complete("done")))
    root = run_llm(three_levels, to="gabriel", grant={"budget_tokens": 1000})

    assert root.status == Status.FAILED
    assert "budget_exhausted" in (root.error or "")
    assert len(server.requests) == 1  # the call that could not fit was never made
    assert root.usage == {"calls": 1, "prompt_tokens": 800, "completion_tokens": 100}
    assert model.unused() != []


def test_the_budget_caps_the_answer_length(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    model.when(agent="gabriel").reply(calls(complete("done")))
    root = run_llm(three_levels, to="gabriel", grant={"budget_tokens": 5000}, max_tokens=100_000)
    assert root.status == Status.DONE, root.error
    cap = server.requests[0].body["max_tokens"]
    assert 0 < cap < 5000  # what is left of the budget once the prompt is paid for


def test_usage_of_earlier_sessions_counts_against_the_budget(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, firm: Firm, run_llm: Runner
) -> None:
    model.when(agent="cto", woken=False).reply(
        replace(calls(delegate("gabriel", "Build the API")), usage=(2500, 400))
    )
    model.when(agent="gabriel").reply(calls(complete("built")))
    model.when(agent="cto", woken=True).reply(calls(complete("done")))
    root = run_llm(three_levels, to="cto", grant={"budget_tokens": 3000})
    assert root.status == Status.FAILED
    assert "budget_exhausted" in (root.error or "")
    assert len(server.requests_for("cto")) == 1  # woken, it had too little left to call again
    assert events_of(firm, "failed", root.id)


def test_a_tool_call_right_after_the_budget_ran_out_is_refused(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, firm: Firm, run_llm: Runner
) -> None:
    # The answer that asks for the tool used the whole budget (900 + 150 of 1000 tokens):
    # the call it makes is denied, though no write of the session has followed that answer.
    model.when(agent="gabriel").reply(replace(LIST, usage=(900, 150)), calls(complete("done")))
    root = run_llm(three_levels, to="gabriel", grant={"budget_tokens": 1000})

    denied = events_of(firm, "tool_denied", root.id)
    assert [e.data["code"] for e in denied] == ["budget_exhausted"]
    assert denied[0].data["tool"] == "files.list"
    assert root.status == Status.FAILED
    assert "budget_exhausted" in (root.error or "")
    assert len(server.requests) == 1
    assert root.usage == {"calls": 1, "prompt_tokens": 900, "completion_tokens": 150}


def test_a_delegation_right_after_the_budget_ran_out_is_refused(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, firm: Firm, run_llm: Runner
) -> None:
    # The answer that delegates used the whole budget; nothing of the session was written
    # since it came in, and a delegation's check reads its standing before its write.
    model.when(agent="cto", woken=False).reply(
        replace(calls(delegate("gabriel", "Build the API")), usage=(2400, 650)),
        calls(complete("done")),
    )
    root = run_llm(three_levels, to="cto", grant={"budget_tokens": 3000})

    denied = events_of(firm, "tool_denied", root.id)
    assert [(e.data["tool"], e.data["code"]) for e in denied] == [
        ("delegate_task", "budget_exhausted")
    ]
    assert len(firm.subtree(root.id)) == 1  # no subtask was made
    assert root.status == Status.FAILED
    assert len(server.requests) == 1
    assert root.usage == {"calls": 1, "prompt_tokens": 2400, "completion_tokens": 650}


def test_a_session_cut_off_by_its_worker_stopping_keeps_the_usage_of_its_last_call(
    tmp_path: Path,
) -> None:
    """Usage rides the session's next write (store/usage.py). A session whose worker stops
    (Ctrl-C) as its model answers writes no settle: the task goes back to the queue, and the
    tokens that answer cost are still counted on it, for its budget when it runs again."""
    answered = threading.Event()

    def ceo(session: Session) -> str | None:
        session.record_usage(1, 300, 40)  # a reply came in: its usage is owed, not written
        answered.set()
        while not session.cancel_signalled():  # the worker stops meanwhile
            time.sleep(0.01)
        return "the answer, too late"

    with Firm(tmp_path / "firm.db", brain=FunctionBrain({"ceo": ceo}), heartbeat=0.2) as firm:
        root = firm.submit(parse_org(ORG, "org.yaml"), "Plan", workspace=tmp_path / "ws")
        firm.engine.start()
        assert answered.wait(30)
        firm.engine.stop()
        task = firm.task(root.id)
    assert task.status == Status.TODO  # handed back, to run again
    assert task.usage == {"calls": 1, "prompt_tokens": 300, "completion_tokens": 40}
