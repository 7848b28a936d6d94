"""`firm audit verify` checks that every body of an approval-gated tool ran only after a
person approved exactly its arguments; forged approvals and ungated bodies fail."""

from __future__ import annotations

import time

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.chain import digest
from firm.tasks import Status
from firm.testing import ModelServer, ScriptedModel
from tests.approvals.conftest import Company, Submit
from tests.approvals.test_approvals import _script_transfer
from tests.audit.conftest import rehash


def _approved_run(firm: Firm, model: ScriptedModel, submit: Submit) -> str:
    _script_transfer(model, [])
    root = submit()
    assert firm.run_until(root, timeout=30).status == Status.WAITING
    (a,) = firm.store.approvals(status="pending")
    firm.store.decide_approval(a.id, "approved", "alice")
    assert firm.run_until(root, timeout=30).status == Status.DONE
    return root


def test_an_approved_run_verifies(
    firm: Firm, model: ScriptedModel, submit: Submit, server: ModelServer, company: Company
) -> None:
    root = _approved_run(firm, model, submit)
    report = verify_bundle(firm.export_audit(root), firm.audit_key().public)
    assert report.verified, [c.line() for c in report.checks]
    assert report.check("approvals").detail.startswith("1 approval-gated call(s) ran")


def test_a_forged_approval_fails_even_when_re_signed(
    firm: Firm, model: ScriptedModel, submit: Submit, company: Company
) -> None:
    root = _approved_run(firm, model, submit)
    key = firm.audit_key()
    bundle = firm.export_audit(root)
    # An insider rewrites the decision into an approval of other arguments and re-signs.
    for e in bundle["entries"]:
        if e["kind"] == "approval_decided":
            e["data"]["args_digest"] = digest({"to": "mallory", "amount": 100_000})
    report = verify_bundle(rehash(bundle, key), key.public)
    assert report.check("integrity").verdict == "PASS"
    assert report.check("approvals").verdict == "FAIL"
    assert "approved other arguments" in report.check("approvals").detail
    # Or turns a denial into the approval the body needed: the decision names no one.
    for e in bundle["entries"]:
        if e["kind"] == "approval_decided":
            e["data"]["by"] = ""
    assert (
        "does not say who"
        in verify_bundle(rehash(bundle, key), key.public).check("approvals").detail
    )


def test_a_body_that_ran_without_an_approval_fails(
    firm: Firm, model: ScriptedModel, submit: Submit, company: Company
) -> None:
    root = _approved_run(firm, model, submit)
    task = firm.task(root)
    # What an engine that skipped the gate would have logged, in the real (signed) log.
    firm.store.append_events(
        [
            (
                "tool_call",
                task.id,
                "cfo",
                {
                    "tool": "payments.transfer",
                    "allowed": True,
                    "ok": True,
                    "args_digest": digest({"to": "mallory", "amount": 5}),
                    "result_digest": digest("sent"),
                    "summary": "to=mallory, amount=5",
                    "checked_seq": firm.store.last_seq(),
                    "checked_at": round(time.time(), 6),
                },
            )
        ]
    )
    report = verify_bundle(firm.export_audit(root), firm.audit_key().public)
    assert report.check("integrity").verdict == "PASS"
    approvals = report.check("approvals")
    assert approvals.verdict == "FAIL" and "ran without a person's approval" in approvals.detail


def test_a_run_cancelled_after_an_approval_still_verifies(
    firm: Firm, model: ScriptedModel, submit: Submit, company: Company
) -> None:
    _script_transfer(model, [])
    root = submit()
    assert firm.run_until(root, timeout=30).status == Status.WAITING
    # The engine stops, so the approved call cannot run before the cancel lands (a live
    # engine would pick it up at once: a run that ends normally, not the case under test).
    firm.engine.stop()
    (a,) = firm.store.approvals(status="pending")
    with Firm(firm.store.url) as person:  # approved while no session has run the call yet
        person.store.decide_approval(a.id, "approved", "alice")
        person.cancel(root, "changed our minds")
    assert firm.store.get_approval(a.id).status == "withdrawn"
    assert company.transfers() == []
    report = verify_bundle(firm.export_audit(root), firm.audit_key().public)
    assert report.check("approvals").verdict == "PASS", report.check("approvals").detail
