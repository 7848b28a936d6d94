"""Reads for watching runs again: the goals (root tasks) with their totals, and one goal's
events in order. Both lean on indexes that exist for the engine anyway (tasks.parent_id,
tasks.root_id, events.task_id), so a long history costs a page, not a scan."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, func, select

from firm.store import schema
from firm.store.base import Event
from firm.store.rows import event_from_row, task_from_row
from firm.tasks import Task

T = schema.tasks
E = schema.events


@dataclass(frozen=True)
class RunSummary:
    """A goal and what its whole tree has done so far."""

    root: Task
    counts: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # agent -> (calls, prompt tokens, completion tokens) over its tasks in the tree
    by_agent: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    @property
    def tasks(self) -> int:
        return sum(self.counts.values())


def run_summaries(conn: Connection, limit: int, offset: int) -> list[RunSummary]:
    """Goals newest first, a page at a time, each with its tree's counts and usage."""
    roots = [
        task_from_row(r)
        for r in conn.execute(
            select(T)
            .where(T.c.parent_id.is_(None))
            .order_by(T.c.created_at.desc(), T.c.id.desc())
            .limit(limit)
            .offset(offset)
        )
    ]
    if not roots:
        return []
    totals: dict[str, dict[str, Any]] = {
        r.id: {"counts": {}, "calls": 0, "prompt": 0, "completion": 0, "agents": {}} for r in roots
    }
    rows = conn.execute(
        select(
            T.c.root_id,
            T.c.status,
            T.c.assignee,
            func.count(),
            func.sum(T.c.calls),
            func.sum(T.c.prompt_tokens),
            func.sum(T.c.completion_tokens),
        )
        .where(T.c.root_id.in_(list(totals)))
        .group_by(T.c.root_id, T.c.status, T.c.assignee)
    )
    for root_id, status, assignee, n, calls, prompt, completion in rows:
        t = totals[root_id]
        calls, prompt, completion = calls or 0, prompt or 0, completion or 0
        t["counts"][status] = t["counts"].get(status, 0) + n
        t["calls"] += calls
        t["prompt"] += prompt
        t["completion"] += completion
        if calls or prompt or completion:
            c0, p0, o0 = t["agents"].get(assignee, (0, 0, 0))
            t["agents"][assignee] = (c0 + calls, p0 + prompt, o0 + completion)
    return [
        RunSummary(
            root=r,
            counts=totals[r.id]["counts"],
            calls=totals[r.id]["calls"],
            prompt_tokens=totals[r.id]["prompt"],
            completion_tokens=totals[r.id]["completion"],
            by_agent=totals[r.id]["agents"],
        )
        for r in roots
    ]


def is_run(conn: Connection, run_id: str) -> bool:
    return (
        conn.execute(select(T.c.id).where(T.c.id == run_id, T.c.parent_id.is_(None))).first()
        is not None
    )


def run_events(conn: Connection, run_id: str, after: int, limit: int) -> list[Event]:
    """The events of every task in one goal's tree with seq > after, in log order."""
    q = (
        select(E)
        .join(T, T.c.id == E.c.task_id)
        .where(T.c.root_id == run_id, E.c.seq > after)
        .order_by(E.c.seq)
        .limit(limit)
    )
    return [event_from_row(r) for r in conn.execute(q)]
