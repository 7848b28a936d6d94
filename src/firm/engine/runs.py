"""A new run, before it is stored: the goal checked, the top agent and its grant, the
workspace, the run's record and its root task, and the company built once to catch a wrong
brain or tool module at submit time rather than later in a worker."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from firm.authority.grants import GrantError, GrantRequest, root_grant
from firm.brains import Brain
from firm.engine.company import Company
from firm.errors import FirmError
from firm.language import detect_language
from firm.org import OrgChart, top_agent
from firm.store.base import NewTask, RunSpec
from firm.tasks import Priority


@dataclass(frozen=True)
class NewRun:
    """What the store needs to create a run, and the company that will work it."""

    run: RunSpec
    root: NewTask
    company: Company


def resolve_workspace(org: OrgChart, workspace: str | Path | None = None) -> Path:
    """Where a run works: the folder given, else the chart's (beside its file), else ./workspace."""
    ws = Path(workspace or org.workspace or "workspace")
    if not ws.is_absolute() and org.workspace and workspace is None and "<" not in org.source:
        ws = Path(org.source).parent / ws
    return ws.resolve()


def absolute_source(source: str) -> str:
    """The chart's file as an absolute path, so a resume from another folder (or machine
    with the same layout) finds the tool modules named relative to it."""
    path = Path(source)
    return str(path.resolve()) if path.is_file() else source


def prepare_run(
    org: OrgChart,
    goal: str,
    *,
    to: str | None = None,
    brain: str = "simulation",
    brain_options: dict[str, Any] | None = None,
    workspace: str | Path | None = None,
    priority: str | Priority = "normal",
    language: str | None = None,
    org_yaml: str | None = None,
    grant: GrantRequest | dict[str, Any] | None = None,
    submitter: str = "user",
    brain_override: Brain | None = None,
    now: float | None = None,
    durable: bool = False,
) -> NewRun:
    """Check a submission and build the run's record and root task (see Engine.submit);
    `durable` as for Company.from_run."""
    goal = goal.strip()
    if not goal:
        raise FirmError("the goal is empty")
    agent = top_agent(org, to)
    try:
        authority = root_grant(org, agent.id, grant, time.time() if now is None else now)
    except GrantError as exc:
        raise FirmError(f"the grant asked for is malformed: {exc}") from None
    ws = resolve_workspace(org, workspace)
    first_line = goal.splitlines()[0].strip()
    title = first_line if len(first_line) <= 200 else first_line[:197] + "…"
    run = RunSpec(
        org_yaml=org_yaml or org.to_yaml(),
        org_source=absolute_source(org.source),
        brain=brain,
        brain_options=dict(brain_options or {}),
        workspace=str(ws),
    )
    # Built now so a wrong brain or tool module fails here, not later in a worker.
    company = Company.from_run(run, brain_override, org=org, durable=durable)
    try:
        prio = Priority.parse(priority)
    except ValueError as exc:
        company.close()
        raise FirmError(str(exc)) from None
    root = NewTask(
        title=title,
        description=goal,
        assignee=agent.id,
        created_by=submitter,
        priority=prio,
        language=language or detect_language(goal),
        grant=authority.to_dict(),
    )
    return NewRun(run, root, company)
