"""The delegate_task calls of one reply are checked against one reading of the task's
standing, taken at the first: one read for the reply, one place in the log for all its
calls; a task lost meanwhile is still refused by the reply's one write."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sqlalchemy import event

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.endcall import with_calls
from firm.events import EventKind
from firm.org import OrgChart
from firm.session import Session
from firm.tasks import Status
from firm.testing import FunctionBrain


def delegate(session: Session, assignee: str, title: str) -> None:
    result = session.call(
        "delegate_task", {"assignee": assignee, "title": title, "description": ""}
    )
    assert result.ok, result.content


def test_a_replys_delegations_share_one_check(tmp_path: Path, three_levels: OrgChart) -> None:
    reads: list[threading.Thread] = []  # the threads that read a check's state

    def ceo(session: Session) -> str | None:
        if session.task.turn > 0:
            return "launched"
        me = threading.current_thread()
        before = reads.count(me)
        with session.batch_delegations():
            delegate(session, "cto", "Build")
            delegate(session, "cmo", "Sell")
        assert reads.count(me) - before == 1  # one reading for the reply
        with session.batch_delegations():  # the next reply reads again
            delegate(session, "cto", "Build more")
        assert reads.count(me) - before == 2
        return None

    brain = FunctionBrain({"ceo": ceo, "cto": lambda s: "built", "cmo": lambda s: "sold"})
    with Firm(tmp_path / "firm.db", brain=brain, heartbeat=0.2) as firm:

        @event.listens_for(firm.store.engine, "before_cursor_execute")
        def _count(_c: Any, _cur: Any, sql: str, *_: Any) -> None:
            if "head_seq" in sql:  # the check's read of its row and the log's head
                reads.append(threading.current_thread())

        root = firm.run(three_levels, "Launch", workspace=tmp_path / "ws", timeout=60)
        calls = [
            e
            for e in with_calls(firm.events(limit=1000))  # in their subtasks' `delegated`
            if e.kind == EventKind.TOOL_CALL and e.data["tool"] == "delegate_task"
        ]
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
    assert root.status == Status.DONE
    assert report.verified, [c.line() for c in report.checks]
    first, second, third = calls
    assert first.data["checked_seq"] == second.data["checked_seq"]
    assert third.data["checked_seq"] > second.data["checked_seq"]


def test_a_reply_of_a_task_cancelled_meanwhile_delegates_nothing(
    tmp_path: Path, three_levels: OrgChart
) -> None:
    def ceo(session: Session) -> str | None:
        with session.batch_delegations():
            delegate(session, "cto", "Build")
            session.store.cancel(session.task.id, "changed my mind", "alice")
            delegate(session, "cmo", "Sell")  # checked against the reply's first reading
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
    assert not [e for e in entries if e.kind == EventKind.DELEGATED]
    calls = [e.data for e in entries if e.kind == EventKind.TOOL_CALL]
    assert [c["superseded"] for c in calls] == [True, True]  # logged, as cut off
    assert report.verified, [c.line() for c in report.checks]
