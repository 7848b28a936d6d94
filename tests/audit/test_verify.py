"""Verify passes on an honest bundle, and every kind of tampering fails the right check."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from firm.audit.verify import verify_bundle
from tests.audit.conftest import Audited, entry, rehash


def verdicts(bundle: Any, key) -> dict[str, str]:
    return {c.name: c.verdict for c in verify_bundle(bundle, key).checks}


def test_an_honest_bundle_verifies(audited: Audited) -> None:
    report = verify_bundle(audited.bundle, audited.key.public)
    assert report.verified, [c.line() for c in report.checks]
    assert [c.name for c in report.checks] == [
        "integrity",
        "monotonicity",
        "containment",
        "approvals",
    ]
    assert "2 delegation(s)" in report.check("monotonicity").detail
    assert "1 denial(s) logged" in report.check("containment").detail
    # The tree's events are all there, with the derived grants and the denial.
    kinds = [(e["kind"], e["agent"]) for e in audited.bundle["entries"]]
    assert ("tool_denied", "rev") in kinds
    rev = entry(audited.bundle, "delegated", "lead")
    assert rev["data"]["grant"]["scopes"] == ["crm.query"]
    assert rev["data"]["grant"]["limits"] == {"max_rows": 10.0}


def test_without_a_key_the_bundle_is_not_called_verified(audited: Audited) -> None:
    report = verify_bundle(audited.bundle, None)
    assert not report.verified
    assert report.check("integrity").verdict == "FAIL"
    assert "no public key" in report.check("integrity").detail


def middle(bundle: dict[str, Any]) -> int:
    return len(bundle["entries"]) // 2


def test_an_edited_entry_fails_integrity(audited: Audited) -> None:
    bad = copy.deepcopy(audited.bundle)
    call = entry(bad, "tool_call", "rev", "crm.query")
    call["data"]["summary"] = "segment=nothing to see"
    result = verify_bundle(bad, audited.key.public).check("integrity")
    assert result.verdict == "FAIL" and "does not match its hash" in result.detail


def test_a_deleted_entry_fails_integrity(audited: Audited) -> None:
    bad = copy.deepcopy(audited.bundle)
    denial = entry(bad, "tool_denied", "rev")
    bad["entries"].remove(denial)
    result = verify_bundle(bad, audited.key.public).check("integrity")
    assert result.verdict == "FAIL" and "not consecutive" in result.detail


def test_two_swapped_entries_fail_integrity(audited: Audited) -> None:
    bad = copy.deepcopy(audited.bundle)
    i = middle(bad)
    bad["entries"][i], bad["entries"][i + 1] = bad["entries"][i + 1], bad["entries"][i]
    assert verdicts(bad, audited.key.public)["integrity"] == "FAIL"


def test_an_inserted_entry_fails_integrity(audited: Audited) -> None:
    bad = copy.deepcopy(audited.bundle)
    i = middle(bad)
    forged = copy.deepcopy(bad["entries"][i])
    forged["data"] = {"tool": "crm.export", "allowed": True}
    bad["entries"].insert(i + 1, forged)
    assert verdicts(bad, audited.key.public)["integrity"] == "FAIL"
    # Renumbering the rest does not help without the key.
    for n, e in enumerate(bad["entries"][i + 1 :], start=bad["entries"][i]["seq"] + 1):
        e["seq"] = n
    assert verdicts(rehash(bad), audited.key.public)["integrity"] == "FAIL"


def test_a_cut_tail_fails_integrity(audited: Audited) -> None:
    bad = copy.deepcopy(audited.bundle)
    del bad["entries"][-3:]
    result = verify_bundle(bad, audited.key.public).check("integrity")
    assert result.verdict == "FAIL" and "cut off" in result.detail


def test_a_widened_grant_fails_integrity_or_if_re_signed_monotonicity(audited: Audited) -> None:
    bad = copy.deepcopy(audited.bundle)
    grant = entry(bad, "delegated", "lead")["data"]["grant"]
    grant["scopes"] = ["crm.export", "crm.query"]
    grant["limits"] = {"max_rows": 1e9}
    rehashed = rehash(bad)
    assert verdicts(rehashed, audited.key.public)["integrity"] == "FAIL"  # old signature
    # Even the key holder cannot make a widened grant pass: monotonicity recomputes it.
    insider = rehash(bad, audited.key)
    report = verify_bundle(insider, audited.key.public)
    assert report.check("integrity").verdict == "PASS"
    mono = report.check("monotonicity")
    assert mono.verdict == "FAIL" and "crm.export" in mono.detail and "max_rows" in mono.detail
    assert not report.verified


def test_a_forged_signature_fails_integrity(audited: Audited) -> None:
    bad = copy.deepcopy(audited.bundle)
    bad["head"]["signature"] = base64.b64encode(bytes(64)).decode()
    result = verify_bundle(bad, audited.key.public).check("integrity")
    assert result.verdict == "FAIL" and "signature" in result.detail
    # A signature made by another key, presented with that key's name, still fails.
    other = Ed25519PrivateKey.generate()
    head = bad["head"]
    from firm.audit.keys import head_message, public_text

    head["signature"] = base64.b64encode(
        other.sign(head_message(head["seq"], head["hash"]))
    ).decode()
    head["public_key"] = public_text(other.public_key())
    assert verdicts(bad, audited.key.public)["integrity"] == "FAIL"


def test_the_wrong_key_fails_integrity(audited: Audited) -> None:
    stranger = Ed25519PrivateKey.generate().public_key()
    assert verdicts(audited.bundle, stranger)["integrity"] == "FAIL"


@pytest.mark.parametrize(
    "empty",
    [
        {},
        {"format": "firm-audit-bundle/1", "entries": []},
        [],
        "nothing",
        {"format": "firm-audit-bundle/1", "entries": [{"seq": "x"}]},
    ],
)
def test_an_empty_or_malformed_bundle_is_not_verified(audited: Audited, empty: Any) -> None:
    report = verify_bundle(empty, audited.key.public)
    assert not report.verified and report.check("integrity").verdict == "FAIL"


def test_a_withheld_entry_of_the_tree_fails_integrity(audited: Audited) -> None:
    from firm.chain import digest

    bad = copy.deepcopy(audited.bundle)
    denial = entry(bad, "tool_denied", "rev")
    denial["data_digest"] = digest(denial.pop("data"))
    result = verify_bundle(bad, audited.key.public).check("integrity")
    assert result.verdict == "FAIL" and "withheld" in result.detail


def test_a_swapped_org_chart_fails_integrity(audited: Audited) -> None:
    bad = copy.deepcopy(audited.bundle)
    bad["org"]["yaml"] = bad["org"]["yaml"].replace('["crm.query", "files.*"]', '["crm.*"]')
    result = verify_bundle(bad, audited.key.public).check("integrity")
    assert result.verdict == "FAIL" and "org chart" in result.detail


def test_a_call_above_its_ceiling_fails_containment(audited: Audited) -> None:
    bad = copy.deepcopy(audited.bundle)
    call = entry(bad, "tool_call", "rev", "crm.query")
    call["data"]["limited_args"]["rows"] = 5000
    report = verify_bundle(rehash(bad, audited.key), audited.key.public)
    assert report.check("integrity").verdict == "PASS"
    result = report.check("containment")
    assert result.verdict == "FAIL" and "max_rows" in result.detail


def test_an_allowed_call_outside_the_grant_fails_containment(audited: Audited) -> None:
    bad = copy.deepcopy(audited.bundle)
    denial = entry(bad, "tool_denied", "rev")
    denial["kind"] = "tool_call"
    denial["data"]["allowed"] = True
    report = verify_bundle(rehash(bad, audited.key), audited.key.public)
    assert report.check("integrity").verdict == "PASS"
    result = report.check("containment")
    assert result.verdict == "FAIL" and "crm.export is outside the task's grant" in result.detail


def test_a_re_signed_log_whose_task_ends_before_it_starts_fails_integrity(
    audited: Audited,
) -> None:
    """An insider who rewrites and re-signs the log still cannot make a task's life one the
    state machine does not allow: here rev's task is "completed" straight from todo."""
    bad = copy.deepcopy(audited.bundle)
    started = entry(bad, "started", "rev")
    started["kind"] = "completed"
    report = verify_bundle(rehash(bad, audited.key), audited.key.public)
    integrity = report.check("integrity")
    assert integrity.verdict == "FAIL"
    moved = f"entry {started['seq']} (completed) moves task {started['task_id']} from todo to done"
    assert moved in integrity.detail
    assert "which the task state machine does not allow" in integrity.detail
