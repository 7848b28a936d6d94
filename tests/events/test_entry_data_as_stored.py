"""What a commit hands its listeners as an entry's data is what a reader of the log reads back:
plain JSON data as given, anything richer (a tuple, an enum member) as JSON reads it."""

from __future__ import annotations

from enum import IntEnum, StrEnum

import pytest

from firm.chain import canonical_json, entry_hash
from firm.events import EventKind, InvalidEvent
from firm.store import NewTask, RunSpec, SqlStore
from firm.tasks import Status

RUN = RunSpec(
    org_yaml="", org_source="<test>", brain="simulation", brain_options={}, workspace="/tmp/unused"
)
PLAIN = {
    "tool": "files.write",
    "args_digest": "a" * 64,
    "summary": "notes/ünïcode.md",
    "checked_seq": 3,
    "checked_at": 1796136897.076682,
}


class Mood(StrEnum):
    CALM = "calm"


class Level(IntEnum):
    HIGH = 2


def _types(value: object) -> object:
    """The value with every part replaced by its exact type's name, containers kept."""
    if isinstance(value, dict):
        return {type(k).__name__ + ":" + str(k): _types(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [type(value).__name__, *(_types(v) for v in value)]
    return type(value).__name__


def test_plain_data_is_stored_and_chained_as_given(store: SqlStore) -> None:
    task = store.create_run(RUN, NewTask("A", "", "ceo", "user"))
    given = store.append_events([(EventKind.TOOL_STARTED, task.id, "ceo", dict(PLAIN))])
    (read,) = store.events_after(given[0].seq - 1)
    assert read.data == given[0].data == PLAIN
    assert _types(given[0].data) == _types(read.data)
    assert read.hash == entry_hash(
        read.prev_hash, read.seq, read.ts, read.kind, read.task_id, read.agent, PLAIN
    )


def test_richer_data_reaches_listeners_as_a_reader_reads_it(store: SqlStore) -> None:
    task = store.create_run(RUN, NewTask("A", "", "ceo", "user"))
    heard: list[object] = []
    store.subscribe(lambda events: heard.extend(e.data for e in events))
    rich = {
        **PLAIN,
        "summary": Mood.CALM,  # a str subclass
        "checked_seq": Level.HIGH,  # an int subclass
        # Whatever the tool's limited arguments are: a tuple, enum members, pairs.
        "limited_args": {"paths": ("a.md", "b.md"), "pairs": [("x", 1)], "status": Status.DONE},
        "ceilings": {"mood": Mood.CALM},
    }
    given = store.append_events([(EventKind.TOOL_STARTED, task.id, "ceo", rich)])
    (read,) = store.events_after(given[0].seq - 1)
    expected = {
        **PLAIN,
        "summary": "calm",
        "checked_seq": 2,
        "limited_args": {"paths": ["a.md", "b.md"], "pairs": [["x", 1]], "status": "done"},
        "ceilings": {"mood": "calm"},
    }
    assert read.data == expected
    assert given[0].data == expected and heard == [expected]
    assert _types(given[0].data) == _types(read.data) == _types(expected)


def test_circular_data_is_refused_and_nothing_is_written(store: SqlStore) -> None:
    task = store.create_run(RUN, NewTask("A", "", "ceo", "user"))
    before = store.last_seq()
    loop: dict[str, object] = {**PLAIN}
    loop["limited_args"] = {"self": loop}
    with pytest.raises(InvalidEvent, match="not JSON"):
        store.append_events([(EventKind.TOOL_STARTED, task.id, "ceo", loop)])
    assert store.last_seq() == before
    with pytest.raises(ValueError, match="Circular"):
        canonical_json([loop])
