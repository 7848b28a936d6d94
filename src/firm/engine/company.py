"""A company at run time: the org chart a run started with, its brain, tools and workspace."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from firm.authority.check import Denial
from firm.authority.scopes import allows
from firm.brains import Brain, make_brain
from firm.org import OrgChart, parse_org
from firm.store.base import RunSpec
from firm.tasks import Task
from firm.tools.builtin import FILE_TOOLS, LIFECYCLE_TOOLS
from firm.tools.registry import ToolDef, ToolRegistry, import_tool_module, tools_in_module
from firm.tools.workspace import Workspace


def build_registry(org: OrgChart, base_dir: Path | None) -> ToolRegistry:
    registry = ToolRegistry([*LIFECYCLE_TOOLS, *FILE_TOOLS])
    for spec in org.tool_modules:
        for t in tools_in_module(import_tool_module(spec, base_dir)):
            registry.add(t)
    return registry


@dataclass
class Company:
    run: RunSpec
    org: OrgChart
    brain: Brain
    registry: ToolRegistry
    workspace: Workspace

    @classmethod
    def from_run(
        cls, run: RunSpec, brain: Brain | None = None, org: OrgChart | None = None
    ) -> Company:
        """The company of a stored run; `org` saves re-parsing a chart the caller already has."""
        org = org or parse_org(run.org_yaml, run.org_source)
        base = Path(run.org_source).parent if run.org_source and "<" not in run.org_source else None
        brain = brain or make_brain(run.brain, run.brain_options)
        check = getattr(brain, "check_company", None)
        if callable(check):  # a brain that needs settings (a model, a key) says so up front
            check(org)
        return cls(
            run=run,
            org=org,
            brain=brain,
            registry=build_registry(org, base),
            workspace=Workspace(run.workspace),
        )

    # --- authority hooks -----------------------------------------------------------------

    def offers(self, task: Task, tool: ToolDef) -> bool:
        return allows(self.org.tools_of(task.assignee), tool.name)

    def check(self, task: Task, tool: ToolDef, args: dict[str, Any]) -> Denial | None:
        return None

    def derive_grant(
        self,
        parent: Task,
        assignee: str,
        *,
        tools: list[str] | None,
        limits: dict[str, float] | None,
        ttl: float | None,
    ) -> dict[str, Any] | None:
        return None

    def on_denial(self, task: Task, denial: Denial) -> None:
        return None
