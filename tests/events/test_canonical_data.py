"""An entry's data may come as its canonical text already made (chain.Canonical): it is stored
and chained exactly as the same data given as a dict."""

from __future__ import annotations

import pytest

from firm.chain import Canonical, entry_hash
from firm.events import EventKind, InvalidEvent
from firm.store import NewTask, RunSpec, SqlStore
from firm.tasks import Outcome

RUN = RunSpec(
    org_yaml="", org_source="<test>", brain="simulation", brain_options={}, workspace="/tmp/unused"
)
DATA = {
    "tool": "files.write",
    "args_digest": "a" * 64,
    "summary": "notes.md",
    "checked_seq": 3,
    "checked_at": 1796136897.076682,
}


def test_canonical_text_is_stored_as_the_dict_would_be(store: SqlStore) -> None:
    task = store.create_run(RUN, NewTask("A", "", "ceo", "user"))
    given = store.append_events(
        [
            (EventKind.TOOL_STARTED, task.id, "ceo", dict(DATA)),
            (EventKind.TOOL_STARTED, task.id, "ceo", Canonical.of(DATA)),
        ]
    )
    read = store.events_after(given[0].seq - 1)
    assert [e.data for e in read] == [DATA, DATA] == [e.data for e in given]
    for e in read:
        assert e.hash == entry_hash(e.prev_hash, e.seq, e.ts, e.kind, e.task_id, e.agent, DATA)


def test_canonical_text_is_still_checked_against_the_catalogue(store: SqlStore) -> None:
    task = store.create_run(RUN, NewTask("A", "", "ceo", "user"))
    before = store.last_seq()
    with pytest.raises(InvalidEvent, match="Field required"):
        store.append_events([(EventKind.TOOL_STARTED, task.id, "ceo", Canonical.of({"tool": "x"}))])
    with pytest.raises(InvalidEvent, match="not JSON"):
        store.append_events([(EventKind.TOOL_STARTED, task.id, "ceo", Canonical("{not json"))])
    assert store.last_seq() == before


def test_a_late_settle_marks_canonical_entries_superseded_too(store: SqlStore) -> None:
    task = store.create_run(RUN, NewTask("A", "", "ceo", "user"))
    store.claim("w", 1, 3600)
    store.cancel(task.id, "stop")
    call = {**DATA, "allowed": True, "ok": True, "result_digest": "b" * 64}
    late = [(EventKind.TOOL_CALL, task.id, "ceo", Canonical.of(call))]
    assert not store.settle(task.id, "w", Outcome.done("ok"), events=late).applied
    (entry,) = [e for e in store.events_after(0) if e.kind == EventKind.TOOL_CALL]
    assert entry.data == {**call, "superseded": True}
