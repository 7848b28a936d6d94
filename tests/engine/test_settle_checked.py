"""A settle finishes the check of the ending call it carries (store/checked.SettleChecked):
it hands the call's decision the task's state at the head its write read — held, when its
guarded UPDATE changed the row; else as the refusal found it — and writes what the decision
returns in the call's place, on both backends."""

from __future__ import annotations

from typing import Any

from firm.events import EventKind
from firm.store import SqlStore
from firm.store.base import CheckState, PendingEvents
from firm.store.checked import SettleChecked
from firm.tasks import Outcome, Status

from .test_settle_and_wake import manager_with_reports


def _ending(task_id: str, seen: list[CheckState]) -> SettleChecked:
    """complete_task's entry, whose decision records the state it was given and writes the
    call at its head while the task stood, its denial once it was revoked, else as it was."""
    data = _call("complete_task")
    entry = (str(EventKind.TOOL_CALL), task_id, "r0", data)

    def decide(state: CheckState) -> PendingEvents:
        seen.append(state)
        if state.revoked:
            denied = {**data, "checked_seq": state.head_seq, "allowed": False, "code": "revoked"}
            del denied["ok"], denied["result_digest"]
            denied["reason"] = "revoked"
            return [(str(EventKind.TOOL_DENIED), task_id, "r0", denied)]
        if state.status == Status.IN_PROGRESS:
            return [(entry[0], task_id, "r0", {**data, "checked_seq": state.head_seq})]
        return [entry]

    return SettleChecked(entry, decide)


def _call(tool: str) -> dict[str, Any]:
    """An allowed call's entry, as the session checked it (here, at seq 0)."""
    digest = "0" * 64
    return {
        "tool": tool,
        "allowed": True,
        "ok": True,
        "args_digest": digest,
        "result_digest": digest,
        "summary": tool,
        "checked_seq": 0,
        "checked_at": 0.0,
    }


def _owed(task_id: str) -> tuple[str, str, str, dict[str, Any]]:
    return (str(EventKind.TOOL_CALL), task_id, "r0", _call("files.write"))


def test_a_held_settle_places_the_ending_at_the_head_its_update_read(store: SqlStore) -> None:
    _root, (kid,) = manager_with_reports(store, 1)
    head = store.last_seq()
    seen: list[CheckState] = []
    refused = (str(EventKind.TOOL_ERROR), kid.id, "r0", {"tool": "x", "error": "after the end"})
    events = [_owed(kid.id), _ending(kid.id, seen), refused]
    assert store.settle(kid.id, "staff", Outcome.done("ok"), events=events).applied
    (state,) = seen
    assert (state.status, state.worker_id, state.revoked) == (Status.IN_PROGRESS, "staff", False)
    assert state.head_seq == head  # nothing of this commit's before it
    written = [e for e in store.events_after(head) if e.task_id == kid.id]
    assert [(e.kind, e.data.get("tool")) for e in written] == [
        ("tool_call", "files.write"),
        ("tool_call", "complete_task"),
        ("tool_error", "x"),
        ("completed", None),
    ]
    assert written[1].data["checked_seq"] == head and "superseded" not in written[1].data


def test_a_held_settle_writes_the_ending_call_inside_its_completion(store: SqlStore) -> None:
    # Nothing logged after the call: its record is the completion's `call`, one entry, placed
    # at the head the settle's UPDATE read (firm/endcall.py).
    _root, (kid,) = manager_with_reports(store, 1)
    head = store.last_seq()
    events = [_owed(kid.id), _ending(kid.id, [])]
    assert store.settle(kid.id, "staff", Outcome.done("ok"), events=events).applied
    written = [e for e in store.events_after(head) if e.task_id == kid.id]
    assert [(e.kind, e.data.get("tool")) for e in written] == [
        ("tool_call", "files.write"),
        ("completed", None),
    ]
    call = written[1].data["call"]
    assert call == {
        k: v for k, v in _call("complete_task").items() if k not in ("allowed", "ok")
    } | {"checked_seq": head}


def test_a_settle_refused_after_a_revocation_writes_the_endings_denial(store: SqlStore) -> None:
    _root, (kid,) = manager_with_reports(store, 1)
    store.revoke(kid.id, "leak", "security")
    revoked = store.last_seq()
    seen: list[CheckState] = []
    events = [_owed(kid.id), _ending(kid.id, seen)]
    assert not store.settle(kid.id, "staff", Outcome.done("ok"), events=events).applied
    (state,) = seen
    assert state.revoked and state.status == Status.CANCELLED and state.head_seq == revoked
    written = [e for e in store.events_after(revoked) if e.task_id == kid.id]
    assert [(e.kind, e.data["tool"], e.data["superseded"]) for e in written] == [
        ("tool_call", "files.write", True),
        ("tool_denied", "complete_task", True),
    ]
    assert (
        written[1].data["checked_seq"] == revoked and store.get_task(kid.id).status == "cancelled"
    )


def test_a_settle_refused_after_a_cancel_writes_the_ending_as_it_was_checked(
    store: SqlStore,
) -> None:
    _root, (kid,) = manager_with_reports(store, 1)
    store.cancel(kid.id, "changed our minds")
    cancelled = store.last_seq()
    seen: list[CheckState] = []
    events = [_owed(kid.id), _ending(kid.id, seen)]
    assert not store.settle(kid.id, "staff", Outcome.done("ok"), events=events).applied
    (state,) = seen
    assert state.status == Status.CANCELLED and not state.revoked
    written = [e for e in store.events_after(cancelled) if e.task_id == kid.id]
    assert [(e.kind, e.data["tool"], e.data["superseded"]) for e in written] == [
        ("tool_call", "files.write", True),
        ("tool_call", "complete_task", True),
    ]
    assert written[1].data["checked_seq"] == 0  # as the session checked it, before the cancel
    assert not [e for e in store.events_after(cancelled) if e.kind == EventKind.COMPLETED]
