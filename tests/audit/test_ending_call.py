"""complete_task's record in its `completed` entry, delegate_task's in its subtask's
`delegated`: one entry, not two, and the verifier, the readers and an old log (with both
entries) all see the same calls (firm/endcall.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.endcall import with_calls
from firm.store import delegation
from firm.tasks import Task
from tests.audit.conftest import AUDIT_CO, Audited, audit_scripts, entry, rehash
from tests.authority.scripted import (
    ScriptedBrain,
    delegate,
    open_firm,
    run_company,
    write_company,
)


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
    monkeypatch.setattr(delegation, "fold_delegation", lambda written, events: events)
    company = write_company(tmp_path / "old", AUDIT_CO)
    with open_firm(tmp_path / "old", ScriptedBrain(audit_scripts())) as firm:
        root = run_company(firm, company)
        events = firm.events(limit=10_000)
        assert not [e for e in events if "call" in e.data]
        tools = [e.data["tool"] for e in events if e.kind == "tool_call"]
        assert tools.count("complete_task") == 3
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
    assert report.verified, [c.line() for c in report.checks]
    new = verify_bundle(audited.bundle, audited.key.public)
    assert report.check("containment").detail == new.check("containment").detail
    assert sorted(_calls(events)) == sorted(_calls(audited.firm.events(limit=10_000)))


def _batched(tmp_path: Path) -> tuple[Firm, Task, dict[str, Any]]:
    """The audited company, its CEO's two delegations made in one reply (one write)."""

    def ceo(session: Any) -> None:
        with session.batch_delegations():
            session.call("delegate_task", delegate("lead", "Check Q3")[1])
            session.call("delegate_task", delegate("lead", "Check Q4")[1])

    company = write_company(tmp_path / "batch", AUDIT_CO)
    scripts = {**audit_scripts(), "ceo": ceo}
    firm = open_firm(tmp_path / "batch", ScriptedBrain(scripts))
    root = run_company(firm, company)
    return firm, root, firm.export_audit(root.id)


def test_a_delegation_written_with_the_next_carries_its_call(tmp_path: Path) -> None:
    firm, root, bundle = _batched(tmp_path)
    try:
        events = firm.events(limit=10_000)
        key = firm.audit_key()
    finally:
        firm.close()
    q3, q4 = [e for e in events if e.kind == "delegated" and e.agent == "ceo"]
    # Q3's call rode Q4's delegation, right after Q3's entry: it is inside it. Q4's, owed
    # once the block ended, rode the same write, right after Q4's entry: inside it too.
    assert q3.data["call"]["tool"] == "delegate_task" == q4.data["call"]["tool"]
    made = [
        c for c in with_calls(events) if c.kind == "tool_call" and c.data["tool"] == "delegate_task"
    ]
    assert [(c.agent, c.task_id) for c in made if c.seq == q3.seq] == [("ceo", root.id)]
    assert len(made) == len([e for e in events if e.kind == "delegated"])  # one call each
    report = verify_bundle(bundle, key.public)
    assert report.verified, [c.line() for c in report.checks]
    # An insider rewrites the call the delegation carries and re-signs: containment fails.
    bad = copy.deepcopy(bundle)
    for e in bad["entries"]:
        if e["seq"] == q3.seq:
            e["data"]["call"]["tool"] = "payroll.run"  # not in the CEO's grant
    forged = verify_bundle(rehash(bad, key), key.public)
    assert forged.check("integrity").verdict == "PASS"
    assert forged.check("containment").verdict == "FAIL"
    assert "payroll.run is outside the task's grant" in forged.check("containment").detail


def test_a_forged_call_inside_a_completion_fails_containment(audited: Audited) -> None:
    # An insider rewrites the call a completion carries to one its grant never allowed, and
    # re-signs the log: the chain holds, the call does not.
    bad = copy.deepcopy(audited.bundle)
    entry(bad, "completed", "rev")["data"]["call"]["tool"] = "crm.export"
    report = verify_bundle(rehash(bad, audited.key), audited.key.public)
    assert report.check("integrity").verdict == "PASS"
    result = report.check("containment")
    assert result.verdict == "FAIL" and "crm.export is outside the task's grant" in result.detail
    # Without the key, the edit breaks the chain.
    assert verify_bundle(rehash(bad), audited.key.public).check("integrity").verdict == "FAIL"
