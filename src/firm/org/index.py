"""What the engine asks the org chart at every tool call — an agent by id, its reports, its own
tools, whether a tool waits for a person — answered from dicts built once per chart.

A chart is frozen once loaded (its models are `frozen=True`), so nothing derived from it goes
stale; the index lives as long as its chart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from firm.org.chart import AgentSpec, ApprovalNeed

# Answers kept per (agent, tool): the chart's agents times the tools a company has. A caller
# asking about names without end (the public API allows it) empties the memo, never grows it
# without bound.
MEMO_MAX = 50_000

K = TypeVar("K")
V = TypeVar("V")


class ChartIndex:
    def __init__(self, agents: list[AgentSpec], default_tools: list[str]):
        self.by_id: dict[str, AgentSpec] = {a.id: a for a in agents}
        reports: dict[str, list[AgentSpec]] = {a.id: [] for a in agents}
        for a in agents:
            if a.reports_to in reports:
                reports[a.reports_to].append(a)
        self.reports: dict[str, tuple[AgentSpec, ...]] = {k: tuple(v) for k, v in reports.items()}
        defaults = tuple(default_tools)
        self.tools: dict[str, tuple[str, ...]] = {
            a.id: defaults if a.tools is None else tuple(a.tools) for a in agents
        }
        # Whether any agent's own `approvals:` names a tool: most charts have none, and then
        # only the company's rules can put a call before a person.
        self.agent_approvals = any(a.approvals for a in agents)
        self.approvals: dict[tuple[str, str], ApprovalNeed | None] = {}
        self.chains: dict[str, tuple[str, ...]] = {}


def memo(cache: dict[K, V], key: K, compute: Callable[[], V]) -> V:
    """`cache[key]`, computed once. Threads may race to compute it: each gets the same
    answer, from a chart that does not change."""
    try:
        return cache[key]
    except KeyError:
        pass
    value = compute()
    if len(cache) >= MEMO_MAX:
        cache.clear()
    cache[key] = value
    return value
