"""output="verbose": the team's progress as lines, from the activity log's events."""

from __future__ import annotations

from collections.abc import Callable

from firm.events import EventKind
from firm.store.base import Event
from firm.teams.spec import TeamSpec


def event_printer(spec: TeamSpec, decisions_only: bool = False) -> Callable[[list[Event]], None]:
    """output="verbose": one line per manager decision (and per task start and end)."""
    names = {} if decisions_only else {m.id: m.name for m in spec.members}

    def show(events: list[Event]) -> None:
        for e in events:
            line = describe_event(e, names)
            if line:
                print(line, flush=True)

    return show


def describe_event(e: Event, names: dict[str, str]) -> str | None:
    d = e.data
    if e.kind == EventKind.MANAGER_DECISION:
        turn = f"turn {d.get('turn')}"
        verdict = d.get("verdict")
        if verdict == "execute":
            return f"[manager] {turn}: {d.get('task_id')} → {d.get('agent_name')}"
        if verdict == "stop":
            return f"[manager] {turn}: stop"
        if verdict == "reselected":
            return f"[manager] {turn}: ignored — {d.get('reason')}"
        return f"[manager] {turn}: {d.get('reason')}"
    if e.kind == EventKind.MANAGER_OUTPUT_DOWNGRADED:
        return (
            f"[manager] turn {d.get('turn')}: the model API refused {d.get('from')} answers; "
            f"asking with {d.get('to')} from now on"
        )
    if e.agent in names and e.kind in (EventKind.STARTED, EventKind.COMPLETED, EventKind.FAILED):
        return f"[{names[e.agent]}] {e.kind} {e.task_id}"
    if e.kind == EventKind.TEAM_TASK_EXCLUDED:
        return f"[team] {d.get('task_id')} is excluded after {d.get('failures')} failure(s)"
    if e.kind == EventKind.TEAM_ENDED:
        return f"[team] {d.get('status')}" + (f": {d.get('reason')}" if d.get("reason") else "")
    return None
