"""A thought said in a reply whose delegations are written together rides their one commit,
ahead of them; and when that commit is refused (the session lost its task), the thought is
still logged with the session's other late entries, and the audit trail verifies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.events import EventKind
from firm.org import OrgChart
from firm.session import Session
from firm.tasks import Status
from firm.testing import FunctionBrain


def test_a_managers_thought_lands_in_the_commit_of_its_delegations(
    tmp_path: Path, three_levels: OrgChart
) -> None:
    commits: list[list[str]] = []
    with Firm(tmp_path / "firm.db", heartbeat=0.2) as firm:
        stop = firm.store.subscribe(lambda events: commits.append([str(e.kind) for e in events]))
        root = firm.run(three_levels, "Launch", workspace=tmp_path / "ws", timeout=60)
        stop()
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
    assert root.status == Status.DONE
    assert report.verified, [c.line() for c in report.checks]
    with_thought = [kinds for kinds in commits if EventKind.THOUGHT in kinds]
    assert with_thought  # every manager thinks aloud before it delegates
    for kinds in with_thought:
        # Its own commit no more: the thought, then the reply's delegations.
        assert kinds[0] == EventKind.THOUGHT
        assert EventKind.DELEGATED in kinds


def test_a_thought_of_a_session_that_lost_its_task_is_still_logged(
    tmp_path: Path, three_levels: OrgChart
) -> None:
    def ceo(session: Session) -> str | None:
        with session.batch_delegations():
            session.think("Handing the build to the CTO.")
            session.call("delegate_task", {"assignee": "cto", "title": "Build", "description": ""})
            # A person cancels the run while the reply is being written.
            session.store.cancel(session.task.id, "changed my mind", "alice")
        return None

    brain = FunctionBrain({"ceo": ceo})
    with Firm(tmp_path / "firm.db", brain=brain, heartbeat=0.2) as firm:
        root = firm.run(three_levels, "Launch", workspace=tmp_path / "ws", timeout=60)
    # The cancel ends the run at once; the cut-off session's own entries follow it, written
    # before the engine has stopped.
    with Firm(tmp_path / "firm.db") as firm:
        entries = [e for e in firm.events(limit=1000) if e.task_id == root.id]
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
    assert root.status == Status.CANCELLED
    thoughts: list[dict[str, Any]] = [e.data for e in entries if e.kind == EventKind.THOUGHT]
    assert thoughts == [{"text": "Handing the build to the CTO.", "superseded": True}]
    assert not [e for e in entries if e.kind == EventKind.DELEGATED]  # nothing was handed out
    assert report.verified, [c.line() for c in report.checks]
