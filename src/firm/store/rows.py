"""Rows as the store's callers see them: tasks and events out of SQL rows."""

from __future__ import annotations

import json
from collections.abc import Callable
from json.scanner import make_scanner
from operator import itemgetter
from typing import Any, cast

from firm.store.base import Event
from firm.store.preparedrows import Row as PreparedRow
from firm.tasks import Priority, Status, Task

STATUS = {s.value: s for s in Status}
_PRIORITY = {p.value: p for p in Priority}
_new = object.__new__


# The columns a task takes as they are, then those it converts, in task_from_row's order.
_AS_THEY_ARE = (
    "id",
    "root_id",
    "parent_id",
    "title",
    "description",
    "assignee",
    "created_by",
    "language",
    "result",
    "error",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "turn",
    "attempts",
    "worker_id",
    "lease_expires_at",
)
_CONVERTED = (
    "status",
    "priority",
    "files",
    "grant",
    "revoked",
    "calls",
    "prompt_tokens",
    "completion_tokens",
)
Picks = tuple[Callable[[Any], tuple[Any, ...]], Callable[[Any], tuple[Any, ...]]]
# By a prepared row's class (its statement's columns, fixed), else by the columns' names.
_picks: dict[Any, Picks] = {}


def _picks_for(row: Any) -> Picks:
    cls = type(row)
    fixed = issubclass(cls, PreparedRow)
    picks = _picks.get(cls if fixed else row._fields)
    if picks is None:
        names = row._fields
        picks = (
            itemgetter(*(names.index(n) for n in _AS_THEY_ARE)),
            itemgetter(*(names.index(n) for n in _CONVERTED)),
        )
        _picks[cls if fixed else names] = picks
    return picks


def task_from_row(row: Any) -> Task:
    """A task out of a row of its table's columns (others, such as a lineage's head_seq, may
    come with them)."""
    as_they_are, converted = _picks.get(type(row)) or _picks_for(row)
    status, priority, files, grant, revoked, calls, prompt, completion = converted(row)
    # Built straight into its __dict__: a frozen dataclass's __init__ sets each of its 24
    # fields through object.__setattr__, as much as the rest of reading a row. Every field
    # is set here (tests/engine/test_prepared.py holds it to that).
    task: Task = _new(Task)
    fields = task.__dict__
    fields.update(zip(_AS_THEY_ARE, as_they_are(row), strict=True))
    fields["status"] = STATUS[status]
    fields["priority"] = _PRIORITY[priority]
    fields["files"] = () if not files or files == "[]" else tuple(_json(files))
    fields["grant"] = _json(grant) if grant else None
    fields["revoked"] = bool(revoked)
    fields["usage"] = {"calls": calls, "prompt_tokens": prompt, "completion_tokens": completion}
    return task


# json.loads, less its two Python frames (decode, raw_decode) around the C scanner: the
# store's own JSON columns (a task's grant and files, three rows a task) hold no leading
# space or trailing text; anything else takes json.loads, errors included.
_scan: Callable[[str, int], tuple[Any, int]] = make_scanner(cast(Any, json.JSONDecoder()))


def _json(text: str) -> Any:
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def event_from_row(row: Any) -> Event:
    m = row._mapping
    return Event(
        seq=m["seq"],
        ts=m["ts"],
        kind=m["kind"],
        task_id=m["task_id"],
        agent=m["agent"],
        data=_json(m["data"]),
        prev_hash=m["prev_hash"],
        hash=m["hash"],
    )
