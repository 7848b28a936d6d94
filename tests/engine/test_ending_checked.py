"""complete_task and fail_task are checked by the settle's write (firm/ending.py): the call
itself reads nothing, the settle that carries its effect places its check at the head it
read, and a task lost meanwhile gets no ending — on both backends, with the loss made by
another store, as another process would (no in-process signal)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from firm.api import Firm
from firm.events import EventKind
from firm.session import Session
from firm.store import SqlStore
from firm.store.base import Event
from tests.engine.test_checked_write import _run, _statements

ENDINGS = [("complete_task", {"result": "the list"}), ("fail_task", {"reason": "no list"})]


def _of_dev(events: list[Event]) -> list[Event]:
    return [e for e in events if e.agent == "dev"]


def _dev_task(firm: Firm) -> str:
    return firm.store.list_tasks(assignee="dev")[0].id


@pytest.mark.parametrize(("name", "args"), ENDINGS)
def test_an_ending_call_reads_nothing_and_is_placed_by_its_settle(
    tmp_path: Path, store_url: str, name: str, args: dict[str, Any]
) -> None:
    seen: dict[str, Any] = {}

    def dev(session: Session) -> None:
        with _statements(session.store) as statements:
            seen["result"] = session.call(name, args)
        seen["statements"] = statements

    firm, events, _ran, _root = _run(tmp_path, store_url, dev, lambda firm: None)
    assert seen["result"].ok
    assert seen["statements"] == []  # no read, no write: its effect and record ride the settle
    ended = EventKind.COMPLETED if name == "complete_task" else EventKind.FAILED
    (outcome,) = [e for e in events if e.kind == ended and e.agent == "dev"]
    # Its record is its ending's entry: one entry, not a tool_call beside it (firm/endcall.py).
    assert not [
        e for e in _of_dev(events) if e.kind == EventKind.TOOL_CALL and e.data["tool"] == name
    ]
    call = outcome.data["call"]
    assert call["tool"] == name and "superseded" not in call
    # Checked at the head the settle read: between the two, only what the settle itself
    # wrote ahead of it (the query's result the session still owed).
    between = [e for e in events if call["checked_seq"] < e.seq < outcome.seq]
    assert [(e.kind, e.data["tool"]) for e in between] == [(EventKind.TOOL_CALL, "crm.query")]
    assert firm.store.get_task(_dev_task(firm)).status == (
        "done" if ended == "completed" else "failed"
    )


@pytest.mark.parametrize(("name", "args"), ENDINGS)
def test_an_ending_call_after_a_revocation_elsewhere_is_denied_and_settles_nothing(
    tmp_path: Path,
    store_url: str,
    open_any: Callable[[], SqlStore],
    name: str,
    args: dict[str, Any],
) -> None:
    def revoke(firm: Firm) -> None:
        open_any().revoke(_dev_task(firm), "leak", "security")

    firm, events, _ran, _root = _run(tmp_path, store_url, lambda s: s.call(name, args), revoke)
    (revoked,) = [e for e in events if e.kind == EventKind.REVOKED]
    denials = [e for e in events if e.kind == EventKind.TOOL_DENIED]
    # (When this process heard of it first — PostgreSQL's NOTIFY — the call was checked by a
    # read instead, and the scripted brain, told so, tried complete_task as well.)
    assert name in {d.data["tool"] for d in denials}
    for denied in denials:
        assert denied.data["code"] == "revoked"
        # Denied where it was checked: at or after the revocation, before itself.
        assert revoked.seq <= denied.data["checked_seq"] < denied.seq
    dev = _of_dev(events)
    assert not [e for e in dev if e.kind == EventKind.TOOL_CALL and e.data["tool"] == name]
    assert not [e for e in dev if e.kind in (EventKind.COMPLETED, EventKind.FAILED)]
    task = firm.store.get_task(_dev_task(firm))
    assert task.revoked and task.status == "cancelled"


def test_a_complete_after_a_cancel_elsewhere_writes_no_done_and_its_calls_stay_logged(
    tmp_path: Path, store_url: str, open_any: Callable[[], SqlStore]
) -> None:
    def cancel(firm: Firm) -> None:
        open_any().cancel(_dev_task(firm), "changed our minds")

    def dev(session: Session) -> None:
        session.call("complete_task", {"result": "the list"})

    firm, events, ran, _root = _run(tmp_path, store_url, dev, cancel)
    assert ran == ["crm.query"]
    assert not [e for e in _of_dev(events) if e.kind == EventKind.COMPLETED]
    assert firm.store.get_task(_dev_task(firm)).status == "cancelled"
    (cancelled,) = [e for e in events if e.kind == EventKind.CANCELLED]
    calls = [e for e in events if e.kind == EventKind.TOOL_CALL and e.agent == "dev"]
    # Whatever the session made is written after the cancel, as from a superseded session;
    # the complete (when the session made it before it heard of the cancel) as it was
    # checked, before the cancel — which is what lets the bundle verify (in _run).
    assert [e.data["tool"] for e in calls][:1] == ["crm.query"]
    for call in calls:
        assert call.seq > cancelled.seq and call.data["superseded"] is True
        assert call.data["checked_seq"] < cancelled.seq
