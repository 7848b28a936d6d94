"""Rows as the store's callers see them: tasks and events out of SQL rows."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.engine import Row

from firm.store.base import Event
from firm.tasks import Priority, Status, Task


def task_from_row(row: Row[Any]) -> Task:
    m = row._mapping
    return Task(
        id=m["id"],
        root_id=m["root_id"],
        parent_id=m["parent_id"],
        title=m["title"],
        description=m["description"],
        status=Status(m["status"]),
        assignee=m["assignee"],
        created_by=m["created_by"],
        priority=Priority(m["priority"]),
        language=m["language"],
        result=m["result"],
        files=tuple(json.loads(m["files"] or "[]")),
        error=m["error"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        started_at=m["started_at"],
        finished_at=m["finished_at"],
        turn=m["turn"],
        attempts=m["attempts"],
        grant=json.loads(m["grant"]) if m["grant"] else None,
        revoked=bool(m["revoked"]),
        worker_id=m["worker_id"],
        lease_expires_at=m["lease_expires_at"],
        usage={
            "calls": m["calls"],
            "prompt_tokens": m["prompt_tokens"],
            "completion_tokens": m["completion_tokens"],
        },
    )


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
