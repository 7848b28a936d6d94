"""The monotonicity check: no delegate holds more authority than its delegator.

Every delegated grant is within its delegator's grant in every dimension (scopes, ceilings,
expiry, budget), within the assignee's own authority in the org chart, along the chart (to a
direct report), and siblings' budgets add up to no more than their delegator's.
"""

from __future__ import annotations

from firm.audit.bundle import Node
from firm.audit.report import Check, verdict
from firm.authority import grants as g
from firm.org import OrgChart


def monotonicity(nodes: dict[str, Node], relevant: list[str], org: OrgChart | None) -> Check:
    problems: list[str] = []
    delegations = 0
    for tid in relevant:
        n = nodes[tid]
        if n.grant is None:
            problems.append(f"{tid}: {n.grant_problem}")
            continue
        if org is not None and org.has_agent(n.assignee):
            own = g.authority_of(org, n.assignee, n.ts)
            for why in g.why_not_within(n.grant, own):
                problems.append(f"{tid} ({n.assignee}) beyond its own authority: {why}")
        elif org is not None:
            problems.append(f"{tid}: {n.assignee!r} is not in the org chart")
        if n.parent is None:
            continue
        delegations += 1
        parent = nodes.get(n.parent)
        if parent is None:
            problems.append(f"{tid}: delegated by {n.parent}, which the bundle does not create")
            continue
        if n.delegator != parent.assignee:
            problems.append(f"{tid}: delegated by {n.delegator}, not by {parent.assignee}")
        if org is not None and not org.is_report(parent.assignee, n.assignee):
            problems.append(f"{tid}: {n.assignee} does not report to {parent.assignee}")
        if parent.grant is None:
            continue
        for why in g.why_not_within(n.grant, parent.grant):
            problems.append(f"{tid} wider than its delegator {parent.id}: {why}")
    for tid in relevant:
        n = nodes[tid]
        if n.grant is None or n.grant.budget_tokens is None:
            continue
        carved = sum(
            c.grant.budget_tokens or 0
            for c in nodes.values()
            if c.parent == tid and c.grant is not None
        )
        if carved > n.grant.budget_tokens:
            problems.append(
                f"{tid}'s subtasks hold {carved} budget tokens, more than its "
                f"{n.grant.budget_tokens}"
            )
    return verdict(
        "monotonicity",
        problems,
        f"{delegations} delegation(s), each within its delegator's grant "
        "(scopes, ceilings, expiry, budget) and the assignee's own authority",
    )
