"""Calls whose body may have run without a result: found when a task's session is re-run.

Every non-lifecycle call writes a `tool_started` entry, committed, before its body runs. A
session killed (or whose store failed) between that entry and the call's `tool_call` leaves
the start unanswered. The next session of the task answers it — a `tool_call` marked
`interrupted`, naming the start — and its brief tells the agent the call MAY HAVE RUN, so the
model checks the effect rather than repeating it blindly. Never run again by the engine.
"""

from __future__ import annotations

from collections.abc import Sequence

from firm.chain import digest
from firm.events import EventKind
from firm.store.base import Event, Store
from firm.tasks import Task

PAGE = 1000


def is_rerun(task: Task) -> bool:
    """A session of this turn started before and did not end it (a claim per session)."""
    return task.attempts > task.turn + 1


def is_first_session(task: Task) -> bool:
    """The task's first session ever (its first claim). Subtasks, calls waiting for a person
    and questions are made only by a task's own sessions, so it has none of them yet."""
    return task.attempts == 1 and task.turn == 0


def answer_interrupted(store: Store, task: Task) -> list[Event]:
    """Close every unanswered start of `task` with an interrupted `tool_call`; returns the
    starts that were unanswered (empty for a task whose sessions all ended cleanly)."""
    if not is_rerun(task):
        return []
    starts: dict[int, Event] = {}
    answered: set[int] = set()
    after = 0
    while True:
        page = store.events_after(after, PAGE, task_ids=[task.id])
        for e in page:
            if e.kind == EventKind.TOOL_STARTED:
                starts[e.seq] = e
            elif e.kind == EventKind.TOOL_CALL and "started_seq" in e.data:
                answered.add(e.data["started_seq"])
        if len(page) < PAGE:
            break
        after = page[-1].seq
    open_starts = [e for seq, e in sorted(starts.items()) if seq not in answered]
    if open_starts:
        store.append_events([_answer(task, e) for e in open_starts])
    return open_starts


def _answer(task: Task, start: Event) -> tuple[str, str | None, str | None, dict]:
    message = (
        "interrupted: the session running this call was cut off before its result was "
        "recorded; the body may have run"
    )
    data = {
        **start.data,
        "allowed": True,
        "ok": False,
        "result_digest": digest(f"error: {message}"),
        "error": message,
        "started_seq": start.seq,
        "interrupted": True,
    }
    return (EventKind.TOOL_CALL, task.id, start.agent, data)


def describe_interrupted(starts: Sequence[Event]) -> list[str]:
    if not starts:
        return []
    lines = ["Calls an earlier session of this task started and never saw finish:"]
    for e in starts:
        lines.append(f"- {e.data.get('tool')}({e.data.get('summary', '')})")
    lines.append(
        "Each MAY HAVE RUN (its session was cut off during the call). Check its effect before "
        "calling it again."
    )
    return ["\n".join(lines)]
