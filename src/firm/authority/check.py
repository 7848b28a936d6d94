"""The one check every tool call passes before its body runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from firm.authority.scopes import allows
from firm.org import OrgChart
from firm.tasks import Task
from firm.tools.registry import ToolDef


@dataclass(frozen=True)
class Denial:
    code: str  # scope_not_granted | ceiling_exceeded | expired | revoked | budget_exhausted
    reason: str

    def __str__(self) -> str:
        return f"denied ({self.code}): {self.reason}"


def check_call(org: OrgChart, task: Task, tool: ToolDef, args: dict[str, Any]) -> Denial | None:
    if tool.lifecycle:
        return None  # being an agent: the org chart, not a scope, governs these
    own = org.tools_of(task.assignee)
    if not allows(own, tool.name):
        return Denial(
            "scope_not_granted",
            f"{task.assignee} may not call {tool.name} (its tools: {', '.join(own) or 'none'})",
        )
    return None
