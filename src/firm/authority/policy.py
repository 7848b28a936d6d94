"""How a company applies the grant algebra: the hooks the session calls before every tool body.

`AuthorityPolicy` holds them for one org chart: the grant a task runs under, whether a tool is
offered, the check of a call, the grant of a subtask, and what a denial does. The engine's
Company is one (engine/company.py); a subclass may tighten a hook, never loosen what the grants
say (the audit verifier would catch it). The session programs against these hooks, so it
imports nothing above authority/.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from firm.authority import grants as g
from firm.authority.check import Denial, Standing, check_call
from firm.org import ApprovalNeed, OrgChart
from firm.tasks import Task
from firm.tools.registry import ToolDef, ToolRegistry

_GRANT_CACHE = 50_000
# Distinct (agent, scopes) pairs kept: a company's agents times the few narrowings they get.
_OFFERED_CACHE = 10_000


class AuthorityPolicy:
    """The authority hooks of one org chart."""

    org: OrgChart

    def __init__(self, org: OrgChart):
        self.org = org

    def _grant_cache(self) -> dict[str, g.Grant]:
        cache: dict[str, g.Grant] | None = self.__dict__.get("_parsed_grants")
        if cache is None:
            cache = self.__dict__["_parsed_grants"] = {}
        return cache

    def grant_of(self, task: Task) -> g.Grant:
        """The grant a task runs under. A task stored without one (written by a firm before
        grants, or straight into the store) holds what its org-chart entry allows."""
        if task.grant is None:
            return g.authority_of(self.org, task.assignee, task.created_at)
        # A task's grant never changes once it is written; parse each one once. Asked several
        # times a call: the hit is one dict read.
        try:
            return self.__dict__["_parsed_grants"][task.id]  # type: ignore[no-any-return]
        except KeyError:
            pass
        cache = self._grant_cache()
        grant = g.Grant.from_dict(task.grant)
        if len(cache) > _GRANT_CACHE:
            cache.clear()
        cache[task.id] = grant
        return grant

    def offers(self, task: Task, tool: ToolDef) -> bool:
        """Whether to show a tool to the agent: in its grant and in its own tools."""
        return g.may_call(self.grant_of(task), self.org, task.assignee, tool.name)

    def offered(self, task: Task, registry: ToolRegistry) -> tuple[ToolDef, ...]:
        """The tools a task's sessions are offered: the lifecycle tools its place in the chart
        allows (delegate_task with reports, ask_human where the chart lets it ask), then the
        tools `offers` allows.

        What `offers` answers here depends on the grant's scopes and on what the chart says
        of the agent — its own tools, whether it has reports, whether it may ask a person —
        alone, so sessions of agents alike in those (a company's leaves, mostly: each one
        agent's single session) share one answer, worked out once. A subclass that overrides
        `offers` may look at anything of the task: its answer is asked per session, as the
        hook promises."""
        if type(self).offers is not AuthorityPolicy.offers:
            return self._offered(task, registry)
        agent, org = task.assignee, self.org
        # The registry itself, not its id: an id may be reused once a registry is gone.
        key = (
            tuple(org.tools_of(agent)),
            bool(org.reports(agent)),
            org.may_ask_human(agent),
            self.grant_of(task).scopes,
            registry,
            registry.version,
        )
        cache: dict[Any, tuple[ToolDef, ...]] | None = self.__dict__.get("_offered_tools")
        if cache is None:
            cache = self.__dict__["_offered_tools"] = {}
        found = cache.get(key)
        if found is None:
            if len(cache) > _OFFERED_CACHE:
                cache.clear()
            found = cache[key] = self._offered(task, registry)
        return found

    def _offered(self, task: Task, registry: ToolRegistry) -> tuple[ToolDef, ...]:
        agent = task.assignee
        offered: list[ToolDef] = []
        for t in registry.all():
            if t.lifecycle:
                if t.name == "delegate_task" and not self.org.reports(agent):
                    continue
                if t.name == "ask_human" and not self.org.may_ask_human(agent):
                    continue
                offered.append(t)
            elif self.offers(task, t):
                offered.append(t)
        return tuple(offered)

    def check(
        self,
        standing: Standing,
        tool: ToolDef,
        args: Mapping[str, Any],
        given: frozenset[str] | None = None,
    ) -> Denial | None:
        return check_call(self.org, standing, tool, args, given)

    def derive_grant(
        self,
        parent: Task,
        assignee: str,
        *,
        tools: list[str] | None,
        limits: dict[str, float] | None,
        ttl: float | None,
        now: float,
        remaining_budget: int | None,
    ) -> dict[str, Any]:
        """The grant of a subtask, as stored JSON. Raises GrantError for a bad narrowing."""
        request = g.GrantRequest.build(tools=tools, limits=limits, ttl=ttl)
        derived = g.derive_grant(
            self.grant_of(parent), self.org, assignee, request, now, remaining_budget
        )
        return derived.to_dict()

    def approval_for(self, task: Task, tool: ToolDef) -> ApprovalNeed | None:
        """Whether a granted call waits for a person first: the chart's `approvals:`."""
        return self.org.approval_for(task.assignee, tool.name)

    def plan_for(self, task: Task) -> ApprovalNeed | None:
        """Whether the task's delegations wait for a person, a turn at a time: the chart's
        `approvals:` rules with `delegations: true`."""
        return self.org.plan_for(task.assignee)

    def on_denial(self, task: Task, denial: Denial) -> bool:
        """Whether a denial revokes the node (and its subtree): the org's `on_denial` policy."""
        return self.org.on_denial == "revoke"
