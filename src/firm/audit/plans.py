"""The verifier's plans check: a subtask of a manager whose delegations wait for a person (a
chart rule with `delegations: true`) started only after a person approved the plan that held
it, before any timeout.

Which managers are gated is read from the bundle's org chart, so a delegation logged without
its plan is caught, not only a start that names a plan it does not have.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from firm.audit.bundle import Entry
from firm.events import EventKind
from firm.org import OrgChart

PLAN_TOOL = "delegate_task"


@dataclass
class _Plan:
    task_id: str | None
    subtasks: set[str]
    timeout_at: Any
    decided_ts: float | None = None
    decision: Any = None
    by: Any = None


def plan_problems(
    entries: Sequence[Entry], tree: set[str], org: OrgChart | None
) -> tuple[list[str], int]:
    """The problems found, and how many held subtasks started properly."""
    plans: dict[str, _Plan] = {}
    held: dict[str, tuple[str | None, Any]] = {}  # subtask -> (its plan, its delegator's task)
    started: set[str] = set()
    problems: list[str] = []
    good = 0
    for e in entries:
        d = e.data
        if d is None or e.task_id not in tree:
            continue
        if e.kind == EventKind.DELEGATED:
            pid = d.get("plan")
            gated = org is not None and org.has_agent(str(e.agent)) and org.plan_for(str(e.agent))
            if gated and not isinstance(pid, str):
                problems.append(
                    f"entry {e.seq}: {e.agent} delegated {e.task_id} outside a plan, though the "
                    "org chart puts its delegations before a person"
                )
            if gated or isinstance(pid, str):
                held[str(e.task_id)] = (pid if isinstance(pid, str) else None, d.get("parent_id"))
        elif e.kind == EventKind.APPROVAL_REQUESTED and d.get("tool") == PLAN_TOOL:
            subtasks = d.get("subtasks")
            plans[str(d.get("id"))] = _Plan(
                e.task_id,
                {str(s) for s in subtasks} if isinstance(subtasks, list) else set(),
                d.get("timeout_at"),
            )
        elif e.kind == EventKind.APPROVAL_DECIDED:
            plan = plans.get(str(d.get("id")))
            if plan is not None and plan.decision is None:  # the first decision stands
                plan.decided_ts, plan.decision, plan.by = e.ts, d.get("decision"), d.get("by")
        elif e.kind == EventKind.STARTED and e.task_id in held and e.task_id not in started:
            started.add(e.task_id)
            problem = _start_problem(str(e.task_id), *held[e.task_id], plans)
            if problem is not None:
                problems.append(f"entry {e.seq}: {e.task_id} started, but {problem}")
            else:
                good += 1
    return problems, good


def _start_problem(
    task_id: str, pid: str | None, delegator: Any, plans: dict[str, _Plan]
) -> str | None:
    if pid is None:
        return "it was delegated outside a plan"
    plan = plans.get(pid)
    if plan is None:
        return f"its plan {pid} was never put before a person"
    if plan.task_id != delegator or task_id not in plan.subtasks:
        return f"plan {pid} does not hold it"
    if plan.decision is None:
        return f"plan {pid} was not decided before it"
    if plan.decision != "approved":
        return f"plan {pid} was {plan.decision}, not approved"
    if not isinstance(plan.by, str) or not plan.by.strip() or plan.by == "timeout":
        return f"plan {pid}'s approval does not say who approved it"
    if (
        isinstance(plan.timeout_at, int | float)
        and plan.decided_ts is not None
        and plan.decided_ts > plan.timeout_at
    ):
        return f"plan {pid} was approved after its timeout"
    return None
