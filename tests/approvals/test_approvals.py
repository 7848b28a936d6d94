"""A call that needs a person: granted first, then waits holding no worker; approve, deny,
timeout, cancel; the body runs once, after approval, with exactly the approved arguments."""

from __future__ import annotations

import pytest

from firm.api import Firm
from firm.errors import AlreadyDecided
from firm.events import EventKind
from firm.tasks import Status
from firm.testing import ModelRequest, ScriptedModel, call, calls, complete
from tests.approvals.conftest import Company, Submit


def _events(firm: Firm, kind: str) -> list:
    return [e for e in firm.events(limit=100_000) if e.kind == kind]


def _script_transfer(model: ScriptedModel, seen: list[str]) -> None:
    def first(req: ModelRequest):  # type: ignore[no-untyped-def]
        return calls(call("payments_transfer", to="acme", amount=100))

    def after(req: ModelRequest):  # type: ignore[no-untyped-def]
        seen.append(req.brief)
        return calls(complete("paid: " + req.brief.splitlines()[-2][:200]))

    model.when(agent="cfo", match=lambda r: "waited for a person" not in r.brief).reply(first)
    model.when(agent="cfo", brief_contains="waited for a person").reply(after)


def test_approve_runs_the_body_once_with_the_approved_arguments(
    firm: Firm, model: ScriptedModel, submit: Submit, company: Company
) -> None:
    seen: list[str] = []
    _script_transfer(model, seen)
    root = submit()
    task = firm.run_until(root, timeout=30)
    assert task.status == Status.WAITING  # the call waits; the task holds no worker
    assert company.transfers() == []  # the body has not run
    assert firm.engine.running == []
    (waiting,) = firm.store.approvals(status="pending")
    assert (waiting.tool, waiting.args, waiting.agent) == (
        "payments.transfer",
        {"to": "acme", "amount": 100},
        "cfo",
    )
    asked = _events(firm, EventKind.APPROVAL_REQUESTED)
    assert [e.data["id"] for e in asked] == [waiting.id]

    decided = firm.store.decide_approval(waiting.id, "approved", "alice", "ok for March")
    assert decided.status == "approved" and decided.decided_by == "alice"
    # Woken in the transaction that recorded the decision: its entry follows at once.
    (d,) = _events(firm, EventKind.APPROVAL_DECIDED)
    woken = [e for e in _events(firm, EventKind.WOKEN) if e.task_id == root]
    assert [e.seq for e in woken] == [d.seq + 1] and woken[0].ts == d.ts
    with pytest.raises(AlreadyDecided, match="first decision stands"):
        firm.store.decide_approval(waiting.id, "denied", "bob", "too late")

    done = firm.run_until(root, timeout=30)
    assert done.status == Status.DONE, done.error
    assert company.transfers() == ["acme 100"]
    assert "sent 100 to acme" in seen[0]  # the agent's brief gave it the result
    (ran,) = [e for e in _events(firm, EventKind.TOOL_CALL) if e.data.get("approval")]
    assert ran.data["approval"] == waiting.id and ran.data["args_digest"] == waiting.args_digest
    (d,) = _events(firm, EventKind.APPROVAL_DECIDED)
    decision = (d.data["decision"], d.data["by"], d.data["note"])
    assert decision == ("approved", "alice", "ok for March")
    assert firm.store.get_approval(waiting.id).status == "ran"


def test_deny_gives_the_model_the_reason_and_the_body_never_runs(
    firm: Firm, model: ScriptedModel, submit: Submit, company: Company
) -> None:
    seen: list[str] = []
    _script_transfer(model, seen)
    root = submit()
    assert firm.run_until(root, timeout=30).status == Status.WAITING
    (waiting,) = firm.store.approvals(status="pending")
    firm.store.decide_approval(waiting.id, "denied", "bob", "wrong account: use the EUR one")
    assert firm.run_until(root, timeout=30).status == Status.DONE
    assert company.transfers() == []
    assert "denied by bob" in seen[0] and "wrong account: use the EUR one" in seen[0]


def test_timeout_denies_and_wakes_the_task(
    tmp_path, firm: Firm, model: ScriptedModel, server, db: str
) -> None:
    from tests.approvals.conftest import write_company

    company = write_company(tmp_path / "quick", timeout="1s")
    seen: list[str] = []
    _script_transfer(model, seen)
    root = firm.submit(
        company.org_path,
        "Pay Acme",
        brain="llm",
        brain_options=server.brain_options(timeout=5.0),
        workspace=company.folder / "ws",
    )
    done = firm.run_until(root.id, timeout=30)
    while done.status != Status.DONE:  # waiting until the engine's loop times it out
        done = firm.run_until(root.id, timeout=30)
    assert company.transfers() == []
    (a,) = firm.store.approvals()
    assert a.status == "timed_out" and a.decided_by == "timeout"
    assert "no one decided before its timeout" in seen[0]


def test_cancel_withdraws_and_a_later_decision_is_refused(
    firm: Firm, model: ScriptedModel, submit: Submit, company: Company
) -> None:
    _script_transfer(model, [])
    root = submit()
    assert firm.run_until(root, timeout=30).status == Status.WAITING
    (waiting,) = firm.store.approvals(status="pending")
    firm.cancel(root, "no longer needed")
    assert firm.store.get_approval(waiting.id).status == "withdrawn"
    with pytest.raises(AlreadyDecided):
        firm.store.decide_approval(waiting.id, "approved", "alice")
    assert company.transfers() == []


def test_an_ungated_tool_runs_at_once(
    firm: Firm, model: ScriptedModel, submit: Submit, company: Company
) -> None:
    model.when(agent="cfo").reply(calls(call("payments_balance")), calls(complete("1000")))
    root = submit()
    assert firm.run_until(root, timeout=30).status == Status.DONE
    assert firm.store.approvals() == []


def test_a_call_the_grant_denies_is_denied_never_sent_for_approval(
    tmp_path, firm: Firm, model: ScriptedModel, server
) -> None:
    from tests.approvals.conftest import ORG, write_company

    narrow = ORG.replace('tools: ["payments.*", "files.*"]', 'tools: ["payments.balance"]')
    company = write_company(tmp_path / "narrow", org=narrow)
    results: list[list[str]] = []

    def after(req: ModelRequest):  # type: ignore[no-untyped-def]
        results.append(req.tool_results)
        return calls(complete("could not pay"))

    model.when(agent="cfo", step=0).reply(calls(call("payments_transfer", to="x", amount=1)))
    model.when(agent="cfo").reply(after)
    root = firm.submit(
        company.org_path,
        "Pay",
        brain="llm",
        brain_options=server.brain_options(timeout=5.0),
        workspace=company.folder / "ws",
    )
    assert firm.run_until(root.id, timeout=30).status == Status.DONE
    assert firm.store.approvals() == []
    assert _events(firm, EventKind.APPROVAL_REQUESTED) == []
    assert [e.data["tool"] for e in _events(firm, EventKind.TOOL_DENIED)] == ["payments.transfer"]
    assert company.transfers() == []
