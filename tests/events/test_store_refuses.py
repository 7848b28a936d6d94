"""The store writes only events the catalogue knows, with data of the right shape; it reads
whatever an older version wrote."""

from __future__ import annotations

import pytest

from firm.chain import canonical_json, entry_hash
from firm.events import EventKind, InvalidEvent
from firm.store import SqlStore
from firm.store import queries as Q
from firm.store.base import NewTask, RunSpec
from firm.store.schema import events as E
from firm.tasks import Outcome, Status

RUN = RunSpec("", "<test>", "simulation", {}, "/tmp/unused")


def test_an_unknown_kind_is_refused_and_nothing_is_written(store: SqlStore) -> None:
    task = store.create_run(RUN, NewTask("A", "", "ceo", "user"))
    before = store.last_seq()
    with pytest.raises(InvalidEvent) as err:
        store.append_events(
            [
                (EventKind.THOUGHT, task.id, "ceo", {"text": "fine"}),
                ("mood", task.id, "ceo", {"text": "cheerful"}),
            ]
        )
    assert "unknown event kind 'mood'" in str(err.value)
    assert task.id in str(err.value)
    assert "thought" in str(err.value)  # the known kinds are listed
    assert store.last_seq() == before  # not even the good entry before it


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"text": 3}, "text: Input should be a valid string"),
        ({}, "text: Field required"),
        ({"text": "hi", "mood": "calm"}, "mood: Extra inputs are not permitted"),
    ],
)
def test_a_malformed_payload_is_refused_naming_the_field(
    store: SqlStore, data: dict[str, object], problem: str
) -> None:
    task = store.create_run(RUN, NewTask("A", "", "ceo", "user"))
    before = store.last_seq()
    with pytest.raises(InvalidEvent) as err:
        store.append_events([(EventKind.THOUGHT, task.id, "ceo", data)])
    assert f"thought event: {problem}" in str(err.value)
    assert store.last_seq() == before


def test_a_settle_carrying_a_malformed_entry_changes_nothing(store: SqlStore) -> None:
    task = store.create_run(RUN, NewTask("A", "", "ceo", "user"))
    store.claim("w", 1, 3600)
    before = store.last_seq()
    bad = [(EventKind.TOOL_CALL, task.id, "ceo", {"tool": "files.write"})]
    with pytest.raises(InvalidEvent, match=r"tool_call event: .*Field required"):
        store.settle(task.id, "w", Outcome.done("ok"), events=bad)
    assert store.get_task(task.id).status == Status.IN_PROGRESS  # the settle rolled back
    assert store.last_seq() == before
    assert store.settle(task.id, "w", Outcome.done("ok")).applied


def test_data_is_checked_as_it_is_stored(store: SqlStore) -> None:
    """A tuple is stored as a JSON list, so it passes as one; a number is never a string."""
    task = store.create_run(RUN, NewTask("A", "", "ceo", "user"))
    store.claim("w", 1, 3600)
    store.settle(task.id, "w", Outcome.done("ok", ("a.md",)))
    (done,) = [e for e in store.events_after(0) if e.kind == EventKind.COMPLETED]
    assert done.data == {"result": "ok", "files": ["a.md"]}
    with pytest.raises(InvalidEvent, match="attempt: Input should be a valid integer"):
        store.append_events(
            [(EventKind.REQUEUED, task.id, "ceo", {"reason": "test", "attempt": "2"})]
        )


def test_a_shape_accepted_before_lets_no_other_shape_through(store: SqlStore) -> None:
    """Data is checked once per shape (its keys and each value's type): what differs from an
    accepted entry in a key, a type or an element's type is checked again and refused."""
    task = store.create_run(RUN, NewTask("A", "", "ceo", "user"))
    good = {"result": "ok", "files": ["a.md", "b.md"]}
    for _ in range(2):  # the second one is accepted by its shape
        store.append_events([(EventKind.COMPLETED, task.id, "ceo", dict(good))])
    before = store.last_seq()
    for bad, problem in [
        ({"result": "ok", "files": ["a.md", 3]}, "files.1: Input should be a valid string"),
        ({"result": 7, "files": []}, "result: Input should be a valid string"),
        ({"result": "ok", "files": [], "x": 1}, "x: Extra inputs are not permitted"),
        ({"result": "ok"}, "files: Field required"),
        ({"result": "ok", "files": True}, "files: Input should be a valid list"),
    ]:
        with pytest.raises(InvalidEvent, match=problem):
            store.append_events([(EventKind.COMPLETED, task.id, "ceo", bad)])
    assert store.last_seq() == before
    store.append_events([(EventKind.COMPLETED, task.id, "ceo", {"result": None, "files": []})])
    assert store.last_seq() == before + 1


def test_events_of_kinds_this_version_does_not_know_still_load(store: SqlStore) -> None:
    """An older (or newer) version's entry, written straight to the table as it wrote it:
    it loads, and the chain goes on after it."""
    task = store.create_run(RUN, NewTask("A", "", "ceo", "user"))
    prev = store.events_after(0)[-1]
    seq, ts, data = prev.seq + 1, round(prev.ts + 1, 6), {"shape": ["whatever", 1]}
    h = entry_hash(prev.hash, seq, ts, "retired_kind", task.id, "ceo", data)
    row = {"seq": seq, "ts": ts, "kind": "retired_kind", "task_id": task.id, "agent": "ceo"}
    with store.engine.begin() as conn:
        conn.execute(
            E.insert().values(**row, data=canonical_json(data), prev_hash=prev.hash, hash=h)
        )
        if store.dialect != "sqlite":  # on SQLite the head is the last entry
            conn.execute(Q.MOVE_HEAD, {"p_seq": seq, "p_hash": h})
    (old,) = [e for e in store.events_after(0) if e.kind == "retired_kind"]
    assert old.data == data
    (new,) = store.append_events([(EventKind.THOUGHT, task.id, "ceo", {"text": "after"})])
    assert new.seq == old.seq + 1 and new.prev_hash == old.hash
