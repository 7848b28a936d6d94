"""The office: one company's org chart, an engine working the store, and the live event hub.

This is what the HTTP layer calls; it knows nothing of HTTP. New goals use the org chart the
office was opened with; the store may hold runs of other charts too (a `firm run` in another
terminal), and the office shows and steers those as well.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from firm.api import Firm
from firm.authority.grants import GrantRequest
from firm.brains import make_brain
from firm.engine import resolve_workspace
from firm.errors import FirmError, TaskNotFound, some_of
from firm.org import OrgChart, load_org
from firm.pricing import Prices, estimate, prices_view
from firm.server.access import AccessPolicy
from firm.server.desk_streams import DeskStreams
from firm.server.hub import EventHub
from firm.store import SqlStore
from firm.tasks import OPEN, Task
from firm.tools.workspace import Workspace

SNAPSHOT_RECENT = 400  # newest tasks a live view starts with, besides every open one
SNAPSHOT_ROOT_COUNTS = 200  # goals whose whole counts the snapshot carries
SNAPSHOT_APPROVALS = 1000  # waiting calls a live view starts with (the oldest first)


class Office:
    def __init__(
        self,
        org_file: str | Path,
        *,
        db: str | Path | None = None,
        brain: str = "simulation",
        brain_options: dict[str, Any] | None = None,
        grant: GrantRequest | None = None,
        workspace: str | Path | None = None,
        max_concurrent: int | None = None,
        policy: AccessPolicy,
        heartbeat: float = 1.0,
    ):
        path = Path(org_file)
        self.org: OrgChart = load_org(path)
        self.org_yaml = path.read_text(encoding="utf-8")
        self.brain = brain
        self.brain_options = dict(brain_options or {})
        self.grant = grant  # what every goal given through the office is narrowed to
        make_brain(brain, self.brain_options)  # an unknown brain or bad option fails now
        self.workspace = Workspace(resolve_workspace(self.org, workspace))
        self.policy = policy
        self.firm = Firm(
            db, max_concurrent=max_concurrent or self.org.max_concurrent, heartbeat=heartbeat
        )
        self.hub = EventHub(self.firm.store)
        self.streams = DeskStreams()  # what desks' agents are writing now, live only
        self.hub.on_thought = self.streams.landed
        self._workspaces: dict[str, Workspace] = {}
        self._workspaces_lock = threading.Lock()

    @property
    def store(self) -> SqlStore:
        return self.firm.store

    # --- lifecycle -----------------------------------------------------------------------

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the engine (which also recovers work a dead process left) and the hub."""
        self.streams.start(self.store, loop)
        self.firm.engine.start()
        self.hub.start(loop)

    def close(self) -> None:
        self.hub.stop()
        self.streams.stop()
        self.firm.close()  # running sessions are handed back to todo, resumable

    # --- steering ------------------------------------------------------------------------

    def submit(self, goal: str, *, to: str | None, priority: str, language: str | None) -> Task:
        if to is not None and not self.org.has_agent(to):
            known = some_of(a.id for a in self.org.agents)
            raise UnknownAgent(f"{to!r} is not an agent of {self.org.company} (known: {known})")
        if to is None and len(self.org.roots()) > 1:
            tops = some_of(a.id for a in self.org.roots())
            raise UnknownAgent(
                f"{self.org.company} has several top agents ({tops}); say which one in 'to'"
            )
        return self.firm.submit(
            self.org,
            goal,
            to=to,
            brain=self.brain,
            brain_options=self.brain_options,
            workspace=self.workspace.root,
            priority=priority,
            language=language,
            grant=self.grant,
            org_yaml=self.org_yaml,
        )

    def cancel(self, task_id: str, reason: str) -> tuple[Task, list[str]]:
        task = self.store.get_task(task_id)
        if task.terminal:
            raise NotOpen(f"{task_id} is already {task.status}; there is nothing to cancel")
        cancelled = self.firm.cancel(task_id, reason)
        return self.store.get_task(task_id), cancelled

    # --- reading -------------------------------------------------------------------------

    def workspace_of(self, run_id: str | None) -> Workspace:
        """The workspace of a run (its files are relative to it), or of new goals."""
        if run_id is None:
            return self.workspace
        with self._workspaces_lock:
            ws = self._workspaces.get(run_id)
        if ws is None:
            try:
                root = Path(self.store.run(run_id).workspace)
            except TaskNotFound:
                raise TaskNotFound(run_id) from None
            if not root.is_dir():
                raise FileMissing(f"the workspace of run {run_id} ({root}) no longer exists")
            ws = Workspace(root)
            with self._workspaces_lock:
                self._workspaces[run_id] = ws
        return ws

    def org_view(self) -> dict[str, Any]:
        org = self.org
        return {
            "company": org.company,
            "description": org.description,
            "max_concurrent": org.max_concurrent,
            "top": [a.id for a in org.roots()],
            "agents": [
                {
                    "id": a.id,
                    "name": a.name,
                    "title": a.title,
                    "reports_to": a.reports_to,
                    "reports": [r.id for r in org.reports(a.id)],
                    "tools": org.tools_of(a.id),
                    "instructions": a.instructions,
                    "model": self.model_of(a.id),
                }
                for a in org.agents
            ],
            "brain": self.brain,
            "workspace": str(self.workspace.root),
            "prices": prices_view(self.prices),
        }

    @property
    def prices(self) -> Prices | None:
        return self.org.llm.prices if self.org.llm else None

    def model_of(self, agent_id: str) -> str | None:
        """The model an agent's calls are priced at (the office's --model counts)."""
        option = self.brain_options.get("model")
        return self.org.model_of(agent_id, option if isinstance(option, str) else None)

    def cost(self, agent_id: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """The estimated cost of an agent's usage, None when its model has no price."""
        return estimate(self.prices, self.model_of(agent_id), prompt_tokens, completion_tokens)

    def snapshot_tasks(self) -> list[Task]:
        """Every open task and the newest ones, with the goals (roots) they belong to."""
        store = self.store
        total = sum(store.counts().values())
        chosen: dict[str, Task] = {}
        for t in store.list_tasks(limit=SNAPSHOT_RECENT, offset=max(0, total - SNAPSHOT_RECENT)):
            chosen[t.id] = t
        for status in OPEN:
            for t in store.list_tasks(status=str(status), limit=5000):
                chosen[t.id] = t
        missing_roots = {t.root_id for t in chosen.values()} - set(chosen)
        for root_id in list(missing_roots)[:100]:
            try:
                chosen[root_id] = store.get_task(root_id)
            except TaskNotFound:
                continue
        return sorted(chosen.values(), key=lambda t: (t.created_at, t.id))

    def snapshot(self) -> dict[str, Any]:
        """The state a live view starts from. It reflects at least every event up to `seq`
        (perhaps a few more); the events after `seq` follow, so applying them converges."""
        seq = self.store.last_seq()
        tasks = self.snapshot_tasks()
        roots = sorted({t.root_id for t in tasks})[:SNAPSHOT_ROOT_COUNTS]
        return {
            "type": "snapshot",
            "seq": seq,
            "org": self.org_view(),
            "tasks": [t.to_dict() for t in tasks],
            "agents": self.hub.notes(),
            "counts": self.store.counts(),
            # Each goal's tasks by status, all of them: the snapshot carries only the open and
            # newest tasks, so a big run's progress cannot be counted from the tasks it sends.
            "root_counts": self.store.counts_by_root(roots),
            "approvals": self.pending_approvals(),
            "questions": [
                q.to_dict()
                for q in self.store.questions(status="pending", limit=SNAPSHOT_APPROVALS)
            ],
        }

    def pending_approvals(self) -> list[dict[str, Any]]:
        """What waits for a person, without the arguments (the page fetches those when it
        shows a call): read after `seq`, so the events that follow only add or settle."""
        return [
            {k: v for k, v in a.to_dict().items() if k != "args"}
            for a in self.store.approvals(status="pending", limit=SNAPSHOT_APPROVALS)
        ]


class UnknownAgent(FirmError):
    """A goal names an agent the org chart does not have."""


class NotOpen(FirmError):
    """The task has already ended."""


class FileMissing(FirmError):
    """The file or folder asked for does not exist."""
