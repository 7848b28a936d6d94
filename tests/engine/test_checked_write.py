"""A tool call's check and its write-ahead record are one write transaction (firm/checked.py):
the task's state is read inside the write that appends the call's start or its denial, on
both backends, and what another writer changed before it is what the check sees."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.events import EventKind
from firm.session import Session
from firm.store import SqlStore
from firm.tasks import Status
from tests.authority.scripted import ScriptedBrain, write_company

ORG = """\
company: Checked Co
tool_modules: [crm_tools.py]
agents:
  - {id: ceo, name: Ava, title: CEO, tools: ["crm.*"]}
  - {id: dev, name: Dan, title: Analyst, reports_to: ceo, tools: ["crm.query", "crm.export"]}
"""


def _ceo(session: Session) -> None:
    session.call("delegate_task", {"assignee": "dev", "title": "Pull", "description": "d"})


@contextmanager
def _statements(store: SqlStore) -> Iterator[list[tuple[bool, str]]]:
    """Each statement this thread runs meanwhile, with whether it ran inside a write
    transaction (on PostgreSQL, a group's may run in another member's thread: none here)."""
    seen: list[tuple[bool, str]] = []
    me = threading.get_ident()

    def count(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if threading.get_ident() != me:
            return
        writing = bool(conn.get_execution_options().get("firm_write"))
        if writing and conn.dialect.name == "sqlite":
            # SQLite reads between writes run on the writer's connection, outside any
            # transaction; a write's statements run after its BEGIN, inside one.
            driver = conn.connection.driver_connection
            writing = statement.startswith("BEGIN") or bool(driver.in_transaction)
        seen.append((writing, statement))

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(store.engine, "before_cursor_execute", count)


def _run(
    tmp_path: Path, url: str, dev: Callable[[Session], None], between: Callable[[Firm], None]
) -> tuple[Firm, list[Any], list[str], str]:
    """Run the company: the ceo delegates to dev; `between` runs while dev waits after its
    first call (from another store, as another process would: no in-process signal)."""
    company = write_company(tmp_path / "co", ORG)
    paused, go_on = threading.Event(), threading.Event()

    def script(session: Session) -> None:
        # The CEO's session ends (waiting for this report) before the first call: its settle
        # writes its own entries, and landing between this session's writes it would stand
        # where a test below asserts nothing came between (it did so on a loaded machine).
        deadline = time.monotonic() + 30
        assert session.task.parent_id is not None
        while session.store.get_task(session.task.parent_id).status != Status.WAITING:
            assert time.monotonic() < deadline, "the CEO's session never ended"
            time.sleep(0.01)
        session.call("crm.query", {"segment": "smb", "rows": 5})
        paused.set()
        assert go_on.wait(30)
        dev(session)

    firm = Firm(url, brain=ScriptedBrain({"ceo": _ceo, "dev": script}), heartbeat=0.05)
    with firm:
        root = firm.submit(company.org_path, "Pull the list", workspace=company.folder / "ws")
        firm.engine.start()
        assert paused.wait(30)
        between(firm)
        go_on.set()
        firm.run_until_idle(timeout=30)
        events = firm.events(0, 1000)
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
        assert report.verified, [c.line() for c in report.checks]
    return firm, events, company.ran(), root.id


def _export(session: Session) -> None:
    session.call("crm.export", {"destination": "s3://out"})


def test_a_task_cancelled_by_another_writer_refuses_the_next_call(
    tmp_path: Path, store_url: str, open_any: Callable[[], SqlStore]
) -> None:
    def cancel(firm: Firm) -> None:
        other = open_any()
        other.cancel(firm.store.list_tasks(assignee="dev")[0].id, "changed our minds")

    _, events, ran, _root = _run(tmp_path, store_url, _export, cancel)
    assert ran == ["crm.query"]  # the export's body never ran
    started = [e.data["tool"] for e in events if e.kind == EventKind.TOOL_STARTED]
    assert started == ["crm.query"]  # nor was it recorded as starting
    assert not [e for e in events if e.kind == EventKind.TOOL_DENIED]
    (query,) = [e for e in events if e.kind == EventKind.TOOL_CALL and e.agent == "dev"]
    assert query.data["ok"] is True  # what the session owed is written all the same


def test_a_call_after_a_revocation_is_denied_at_the_seq_it_was_checked(
    tmp_path: Path, store_url: str, open_any: Callable[[], SqlStore]
) -> None:
    def revoke(firm: Firm) -> None:
        open_any().revoke(firm.store.list_tasks(assignee="dev")[0].id, "leak", "security")

    _, events, ran, _root = _run(tmp_path, store_url, _export, revoke)
    assert ran == ["crm.query"]
    (revoked,) = [e for e in events if e.kind == EventKind.REVOKED]
    (denied,) = [
        e for e in events if e.kind == EventKind.TOOL_DENIED and e.data["tool"] == "crm.export"
    ]
    assert denied.data["code"] == "revoked"
    # The check saw the revocation, and its entry says where: at or after it, before itself.
    assert revoked.seq <= denied.data["checked_seq"] < denied.seq


def test_a_granted_call_reads_its_task_inside_the_write_that_records_it(
    tmp_path: Path, store_url: str
) -> None:
    seen: dict[str, Any] = {}

    def dev(session: Session) -> None:
        with _statements(session.store) as statements:
            seen["result"] = session.call("crm.query", {"segment": "mid", "rows": 3})
        seen["statements"] = statements

    _, events, ran, _root = _run(tmp_path, store_url, dev, lambda firm: None)
    assert ran == ["crm.query", "crm.query"]
    assert seen["result"].ok
    statements = seen["statements"]
    # No read of its own before the write: the task's row and the head are read inside it.
    assert [s for inside, s in statements if not inside] == []
    assert sum(1 for _, s in statements if "FROM tasks" in s) == 1
    first, second = [e for e in events if e.kind == EventKind.TOOL_STARTED]
    # The first call's result, owed, rode the second call's start: one write, in call order.
    (answered,) = [
        e for e in events if e.kind == EventKind.TOOL_CALL and first.seq < e.seq < second.seq
    ]
    assert answered.data["started_seq"] == first.seq
    assert answered.seq == second.seq - 1
    # Its check read the head just before that write: nothing came between.
    assert second.data["checked_seq"] == first.seq == answered.seq - 1


def test_a_denied_call_is_logged_with_its_check_and_the_body_never_runs(
    tmp_path: Path, store_url: str
) -> None:
    def dev(session: Session) -> None:
        result = session.call("crm.score", {"customer": "acme"})  # not among dev's tools
        assert not result.ok and "scope_not_granted" in result.content

    _, events, ran, _root = _run(tmp_path, store_url, dev, lambda firm: None)
    assert ran == ["crm.query"]
    (denied,) = [e for e in events if e.kind == EventKind.TOOL_DENIED]
    assert (denied.data["tool"], denied.data["code"]) == ("crm.score", "scope_not_granted")
    # Checked at the head its write read: between it and the denial, only the query's result
    # the session owed, which rode the same write.
    between = [e for e in events if denied.data["checked_seq"] < e.seq < denied.seq]
    assert [(e.kind, e.data["tool"]) for e in between] == [(EventKind.TOOL_CALL, "crm.query")]
