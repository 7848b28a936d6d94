"""The one check every tool call passes before its body runs. Pure: the session reads the
store and hands the facts in as a `Standing`; this module decides.

In order (the first failing one is the reason given):

1. revoked — the task or any ancestor was revoked;
2. expired — now is past the task's or any ancestor's expiry (`fail_task` is exempt: giving up
   stays possible);
3. scope_not_granted — the tool is outside the task's grant, or outside its agent's own
   `tools` (what a task may call is its grant met with its own tools);
4. ceiling_exceeded — an argument the tool declares limited (``limits={"rows": "max_rows"}``)
   is above the grant's ceiling, or left out while a ceiling applies;
5. budget_exhausted — the task's token budget is spent.

Lifecycle tools (delegate_task, complete_task, fail_task) are part of being an agent: the org
chart, not a scope, governs them, so only revocation, expiry and (for delegation, which carves
budget) the budget apply to them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from firm.authority.grants import Grant, _num
from firm.authority.scopes import allows
from firm.org import OrgChart

if TYPE_CHECKING:  # a type only: authority sits below the tools it judges
    from firm.tools.registry import ToolDef

CODES = ("scope_not_granted", "ceiling_exceeded", "expired", "revoked", "budget_exhausted")
EXEMPT_FROM_EXPIRY = frozenset({"fail_task"})
SPENDS_BUDGET_LIFECYCLE = frozenset({"delegate_task"})


@dataclass(frozen=True)
class Denial:
    code: str  # scope_not_granted | ceiling_exceeded | expired | revoked | budget_exhausted
    reason: str

    def __str__(self) -> str:
        return f"denied ({self.code}): {self.reason}"


@dataclass(frozen=True)
class Link:
    """One task on the path from a task up to its root: what bounds the tasks below it."""

    task_id: str
    expires_at: float | None
    revoked: bool


@dataclass(frozen=True)
class Standing:
    """What the store says, at one moment, about the authority a task holds."""

    task_id: str
    agent: str
    grant: Grant
    lineage: tuple[Link, ...]  # the task itself first, then its ancestors, nearest first
    tokens_remaining: int | None
    checked_seq: int  # the log's head when the state was read: the check's place in the log
    checked_at: float


def check_call(
    org: OrgChart,
    standing: Standing,
    tool: ToolDef,
    args: Mapping[str, Any],
    given: frozenset[str] | set[str] | None = None,
) -> Denial | None:
    """Decide whether a call may run. `given` names the arguments the caller passed (a limited
    argument left to its default counts as left out); None means all of them."""
    me = standing.task_id
    for link in standing.lineage:
        if link.revoked:
            whose = "this task" if link.task_id == me else f"its ancestor {link.task_id}"
            return Denial("revoked", f"the authority of {me} is revoked ({whose} was revoked)")
    if tool.name not in EXEMPT_FROM_EXPIRY:
        for link in standing.lineage:
            if link.expires_at is not None and standing.checked_at > link.expires_at:
                whose = "its grant" if link.task_id == me else f"the grant of {link.task_id}"
                return Denial(
                    "expired",
                    f"the authority of {me} has expired ({whose} ended at "
                    f"{link.expires_at:.0f}, now is {standing.checked_at:.0f})",
                )
    if not tool.lifecycle:
        denial = _scope(org, standing, tool) or _ceilings(standing.grant, tool, args, given)
        if denial is not None:
            return denial
    spends = not tool.lifecycle or tool.name in SPENDS_BUDGET_LIFECYCLE
    if spends and standing.tokens_remaining is not None and standing.tokens_remaining <= 0:
        return Denial(
            "budget_exhausted",
            f"{me} has no token budget left (budget {standing.grant.budget_tokens})",
        )
    return None


def _scope(org: OrgChart, standing: Standing, tool: ToolDef) -> Denial | None:
    if not standing.grant.allows(tool.name):
        held = ", ".join(standing.grant.scopes) or "none"
        return Denial(
            "scope_not_granted",
            f"{tool.name} is not in the authority granted to {standing.task_id} (granted: {held})",
        )
    own = org.tools_of(standing.agent)
    if not allows(own, tool.name):
        return Denial(
            "scope_not_granted",
            f"{standing.agent} may hand {tool.name} down but not call it "
            f"(its own tools: {', '.join(own) or 'none'})",
        )
    return None


def _ceilings(
    grant: Grant, tool: ToolDef, args: Mapping[str, Any], given: frozenset[str] | set[str] | None
) -> Denial | None:
    for arg, ceiling in tool.limits.items():
        if ceiling not in grant.limits:
            continue
        bound = grant.limits[ceiling]
        value = args.get(arg)
        if value is None or (given is not None and arg not in given):
            return Denial(
                "ceiling_exceeded",
                f"{tool.name} needs {arg!r} passed explicitly: it is bounded by {ceiling} "
                f"= {_num(bound)}",
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            return Denial(
                "ceiling_exceeded", f"{tool.name}: {arg!r} must be a number to check its ceiling"
            )
        if not math.isfinite(value):  # NaN > bound is False: only a finite number is bounded
            return Denial(
                "ceiling_exceeded",
                f"{tool.name}: {arg!r} is {value}, not a finite number, so no ceiling bounds it",
            )
        if value > bound:
            return Denial(
                "ceiling_exceeded",
                f"{tool.name}: {arg}={_num(value)} is above the ceiling {ceiling} = {_num(bound)}",
            )
    return None
