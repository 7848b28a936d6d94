"""Rows as the store's callers see them: tasks and events out of SQL rows."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.engine import Row

from firm.store.base import Event
from firm.tasks import Priority, Status, Task

_STATUS = {s.value: s for s in Status}
_PRIORITY = {p.value: p for p in Priority}
_new = object.__new__


def task_from_row(row: Any) -> Task:
    m = row._mapping
    files = m["files"]
    grant = m["grant"]
    # Built straight into its __dict__: a frozen dataclass's __init__ sets each of its 24
    # fields through object.__setattr__, as much as the rest of reading a row. Every field
    # is set here (tests/engine/test_prepared.py holds it to that).
    task: Task = _new(Task)
    task.__dict__.update(
        id=m["id"],
        root_id=m["root_id"],
        parent_id=m["parent_id"],
        title=m["title"],
        description=m["description"],
        status=_STATUS[m["status"]],
        assignee=m["assignee"],
        created_by=m["created_by"],
        priority=_PRIORITY[m["priority"]],
        language=m["language"],
        result=m["result"],
        files=() if not files or files == "[]" else tuple(json.loads(files)),
        error=m["error"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        started_at=m["started_at"],
        finished_at=m["finished_at"],
        turn=m["turn"],
        attempts=m["attempts"],
        grant=json.loads(grant) if grant else None,
        revoked=bool(m["revoked"]),
        worker_id=m["worker_id"],
        lease_expires_at=m["lease_expires_at"],
        usage={
            "calls": m["calls"],
            "prompt_tokens": m["prompt_tokens"],
            "completion_tokens": m["completion_tokens"],
        },
    )
    return task


def event_from_row(row: Row[Any]) -> Event:
    m = row._mapping
    return Event(
        seq=m["seq"],
        ts=m["ts"],
        kind=m["kind"],
        task_id=m["task_id"],
        agent=m["agent"],
        data=json.loads(m["data"]),
        prev_hash=m["prev_hash"],
        hash=m["hash"],
    )
