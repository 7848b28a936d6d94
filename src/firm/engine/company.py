"""A company at run time: the org chart a run started with, its brain, tools and workspace.

Its authority hooks (grant_of, offers, check, derive_grant, on_denial) are AuthorityPolicy's,
in firm.authority.policy: a subclass may tighten them, never loosen what the grants say (the
audit verifier would catch it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from firm.authority.policy import AuthorityPolicy
from firm.brains import Brain, make_brain
from firm.errors import FirmError
from firm.org import OrgChart, parse_org
from firm.store.base import RunSpec, Store
from firm.tools.builtin import FILE_TOOLS, LIFECYCLE_TOOLS
from firm.tools.registry import ToolRegistry
from firm.tools.sources import ToolSource, close_sources, open_sources, sources_for
from firm.tools.workspace import Workspace

log = logging.getLogger("firm.engine")


def build_registry(
    org: OrgChart, base_dir: Path | None, sources: list[ToolSource] | None = None
) -> ToolRegistry:
    """The built-in tools and the tools of the chart's sources, which this opens: the caller
    closes them (Company.close); passing none means every source the chart names."""
    if sources is None:
        sources = sources_for(org, base_dir)
    tools = open_sources(sources)
    try:
        return ToolRegistry([*LIFECYCLE_TOOLS, *FILE_TOOLS, *tools])
    except BaseException:
        close_sources(sources)
        raise


@dataclass
class Company(AuthorityPolicy):
    """A run's company; its authority hooks are AuthorityPolicy's (authority/policy.py)."""

    run: RunSpec
    org: OrgChart
    brain: Brain
    registry: ToolRegistry
    workspace: Workspace
    sources: list[ToolSource] = field(default_factory=list)
    # Brains the org chart names for some agents (`brain:`), by name; the run's is `brain`.
    brains: dict[str, Brain] = field(default_factory=dict)

    @classmethod
    def from_run(
        cls,
        run: RunSpec,
        brain: Brain | None = None,
        org: OrgChart | None = None,
        durable: bool = False,
    ) -> Company:
        """The company of a stored run; `org` saves re-parsing a chart the caller already has.
        `durable`: the store fsyncs each commit (PostgreSQL), so the workspace flushes each
        file it writes too; otherwise it follows FIRM_WORKSPACE_SYNC (tools/workspace.py)."""
        org = org or parse_org(run.org_yaml, run.org_source)
        base = Path(run.org_source).parent if run.org_source and "<" not in run.org_source else None
        brain = brain or make_brain(run.brain, run.brain_options)
        check = getattr(brain, "check_company", None)
        if callable(check):  # a brain that needs settings (a model, a key) says so up front
            check(org)
        brains = {
            name: make_brain(name, _options_for(name, run))
            for name in {a.brain or org.brain for a in org.agents} - {None, run.brain}
            if name is not None
        }
        sources = sources_for(org, base)
        return cls(
            run=run,
            org=org,
            brain=brain,
            registry=build_registry(org, base, sources),
            workspace=Workspace(run.workspace, sync=True if durable else None),
            sources=sources,
            brains=brains,
        )

    def brain_for(self, agent_id: str) -> Brain:
        """The brain that works this agent's sessions: its own `brain:` in the chart, else
        the chart's, else the run's (a company can mix: a crewai manager above llm reports)."""
        spec = self.org.agent(agent_id)
        name = spec.brain or self.org.brain
        if name is None or name == self.run.brain:
            return self.brain
        return self.brains[name]

    def close(self) -> None:
        """Close the tool sources the company opened (an MCP server's process, say)."""
        sources, self.sources = self.sources, []
        close_sources(sources)


# Brains that read the same model settings share the run's options (--model, …).
_MODEL_BRAINS = frozenset({"llm", "crewai"})


def _options_for(name: str, run: RunSpec) -> dict[str, Any]:
    """The options of a brain the chart names for some agents."""
    if name in _MODEL_BRAINS and run.brain in _MODEL_BRAINS:
        return dict(run.brain_options)
    return {}


def close_companies(companies: Iterable[Company]) -> None:
    """Close companies' tool sources, each set once (a run's companies share them)."""
    seen: set[int] = set()
    for company in companies:
        if id(company.sources) in seen:
            continue
        seen.add(id(company.sources))
        try:
            company.close()
        except FirmError as exc:
            log.warning("%s", exc)


class Companies:
    """The companies of the runs an engine works, each built once: by the submit that made
    the run, else by the run's first session here."""

    def __init__(self, store: Store, brain: Brain | None = None):
        self._store = store
        self._brain = brain  # the engine's brain for every run, if it was given one
        self._by_run: dict[str, Company] = {}
        self._lock = threading.Lock()

    def add(self, run_id: str, company: Company) -> None:
        with self._lock:
            self._by_run[run_id] = company

    def discard(self, run_id: str) -> None:
        """Forget a run's company and close its tool sources (a run that was never stored)."""
        with self._lock:
            company = self._by_run.pop(run_id, None)
        close_companies([] if company is None else [company])

    def get(self, run_id: str) -> Company:
        with self._lock:
            company = self._by_run.get(run_id)
            if company is None:
                company = Company.from_run(
                    self._store.run(run_id),
                    self._brain,
                    durable=self._store.dialect == "postgresql",
                )
                self._by_run[run_id] = company
            return company

    def close(self) -> None:
        """Close the companies' tool sources (each once: a run's companies share them)."""
        with self._lock:
            companies = list(self._by_run.values())
            self._by_run.clear()
        close_companies(companies)
