"""complete_task's record in its `completed` entry: one entry, not two, and the verifier, the
readers and an old log (with both entries) all see the same call (firm/endcall.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from firm.audit.verify import verify_bundle
from firm.endcall import with_calls
from firm.store import delegation
from tests.audit.conftest import AUDIT_CO, Audited, audit_scripts, entry, rehash
from tests.authority.scripted import ScriptedBrain, open_firm, run_company, write_company


def _calls(events: list[Any]) -> list[tuple[str | None, str, str, str]]:
    """Every allowed call of the log, as a reader sees it: who, which tool, on what."""
    return [
        (e.agent, e.data["tool"], e.data["args_digest"], e.data["summary"])
        for e in with_calls(events)
        if e.kind == "tool_call" and e.data.get("allowed") is True
    ]


def test_a_completion_is_one_entry_that_carries_its_call(audited: Audited) -> None:
    events = audited.firm.events(limit=10_000)
    completed = [e for e in events if e.kind == "completed"]
    assert len(completed) == 3  # ceo, lead, rev
    for e in completed:
        assert e.data["call"]["tool"] == "complete_task"
        assert e.data["call"]["checked_seq"] < e.seq
    raw = [e.data["tool"] for e in events if e.kind == "tool_call"]
    assert "complete_task" not in raw  # no second entry saying the same thing
    # ...and every reader still sees the call, once per task, by the agent that made it.
    ending = [c for c in _calls(events) if c[1] == "complete_task"]
    assert sorted(c[0] for c in ending) == ["ceo", "lead", "rev"]
    report = verify_bundle(audited.bundle, audited.key.public)
    assert report.verified, [c.line() for c in report.checks]
    # crm.query by ceo and rev, delegate_task twice, complete_task three times (crm.export denied)
    assert "7 allowed call(s)" in report.check("containment").detail


def test_an_old_log_with_both_entries_verifies_and_reads_the_same(
    audited: Audited, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same company run as an older firm wrote it: the ending's call in its own entry.
    monkeypatch.setattr(delegation, "fold", lambda *args: None)
    company = write_company(tmp_path / "old", AUDIT_CO)
    with open_firm(tmp_path / "old", ScriptedBrain(audit_scripts())) as firm:
        root = run_company(firm, company)
        events = firm.events(limit=10_000)
        assert not [e for e in events if "call" in e.data]
        assert [e.data["tool"] for e in events if e.kind == "tool_call"].count("complete_task") == 3
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
    assert report.verified, [c.line() for c in report.checks]
    new = verify_bundle(audited.bundle, audited.key.public)
    assert report.check("containment").detail == new.check("containment").detail
    assert sorted(_calls(events)) == sorted(_calls(audited.firm.events(limit=10_000)))


def test_a_forged_call_inside_a_completion_fails_containment(audited: Audited) -> None:
    # An insider rewrites rev's completion to say it made a call its grant never allowed,
    # and re-signs the log: the chain holds, the call does not.
    bad = copy.deepcopy(audited.bundle)
    entry(bad, "completed", "rev")["data"]["call"]["tool"] = "crm.export"
    report = verify_bundle(rehash(bad, audited.key), audited.key.public)
    assert report.check("integrity").verdict == "PASS"
    result = report.check("containment")
    assert result.verdict == "FAIL" and "crm.export is outside the task's grant" in result.detail
    # Without the key, the edit breaks the chain.
    assert verify_bundle(rehash(bad), audited.key.public).check("integrity").verdict == "FAIL"
