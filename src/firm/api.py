"""The Python API: open a store, submit goals, run them, cancel, read tasks and events.

    from firm import Firm, load_org

    with Firm(".firm/firm.db") as f:
        root = f.submit(load_org("acme/company.yaml"), "Launch an AI note-taking app")
        done = f.run_until(root.id)
        print(done.status, done.result)
        for task in f.subtree(root.id):
            print(task.id, task.assignee, task.status)

The CLI is a thin layer over this class.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from firm.audit.export import export_bundle
from firm.audit.keys import AuditKey, key_dir_for, load_or_create_key
from firm.authority.grants import GrantRequest
from firm.brains import Brain
from firm.clock import SYSTEM_CLOCK, Clock
from firm.engine import Engine
from firm.errors import OrgChartError
from firm.org import OrgChart, load_org, parse_org
from firm.store import SqlStore, open_store
from firm.store.base import Event
from firm.tasks import Task


class Firm:
    """A handle on one store and, once work is asked for, an engine working it."""

    def __init__(
        self,
        db: str | Path | None = None,
        *,
        max_concurrent: int | None = None,
        brain: Brain | None = None,
        lease_seconds: float = 30.0,
        heartbeat: float = 1.0,
        global_limit: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
        reading_at_once: int | None = None,
    ):
        """`clock` is what authority's times are read from (when a grant was made, when a call
        was checked); tests pass firm.testing.ManualClock to move past an expiry at once.
        `reading_at_once` is a hint for the engine: how many sessions read the store at once
        (reader connections opened as it starts; default: one per session slot)."""
        self.store: SqlStore = open_store(db)
        self._clock = clock
        self._max_concurrent = max_concurrent
        self._brain = brain
        self._lease = lease_seconds
        self._heartbeat = heartbeat
        self._global_limit = global_limit
        self._reading_at_once = reading_at_once
        self._engine: Engine | None = None

    # --- the engine ----------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = Engine(
                self.store,
                max_concurrent=self._concurrency(),
                lease_seconds=self._lease,
                heartbeat=self._heartbeat,
                global_limit=self._global_limit,
                brain=self._brain,
                clock=self._clock,
                reading_at_once=self._reading_at_once,
            )
        return self._engine

    def _concurrency(self) -> int:
        if self._max_concurrent is not None:
            return self._max_concurrent
        # Without an explicit limit, honour the widest max_concurrent among the open runs.
        limits = [self._run_limit(r) for r in self.store.open_run_ids()]
        return max([4, *[n for n in limits if n]])

    def _run_limit(self, run_id: str) -> int | None:
        run = self.store.run(run_id)
        try:
            return parse_org(run.org_yaml, run.org_source).max_concurrent
        except OrgChartError:
            return None

    def close(self) -> None:
        self.stop()
        self.store.close()

    def close_soon(self) -> None:
        """close() for a caller done with this handle that need not wait for the store's
        file to be synced: the engine stops now, the store closes on a thread, and the
        process waits for that at exit (store/closing.py). Everything was committed."""
        self.stop()
        self.store.close_soon()

    def stop(self) -> None:
        """Stop the engine (as close() does: running sessions are handed back) and start the
        store's close early, beside whatever the caller still reads before close(): nothing
        of the engine's is written after this. A later run_until starts a new engine."""
        if self._engine is not None:
            self._engine.stop()
            self._engine = None
        self.store.copy_wal_soon()

    def __enter__(self) -> Firm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- work ----------------------------------------------------------------------------

    def submit(
        self,
        org: OrgChart | str | Path,
        goal: str,
        *,
        to: str | None = None,
        brain: str = "simulation",
        brain_options: dict[str, Any] | None = None,
        workspace: str | Path | None = None,
        priority: str = "normal",
        language: str | None = None,
        grant: GrantRequest | dict[str, Any] | None = None,
        org_yaml: str | None = None,
        start: bool = False,
    ) -> Task:
        """Create the root task for a goal. Nothing runs until run_until/run_until_idle —
        or, with start=True, at once: the engine starts first, and the run's own commit
        claims its root for it (engine/submitted.py), with no claim round after it.

        The one way work is submitted: the CLI, the office and teams all come through here.
        `brain` is a declared brain's name (firm.brains) and `brain_options` the options
        stored with the run for it. `grant` narrows the top agent's authority for this run,
        e.g. ``{"tools": ["crm.query"], "limits": {"max_rows": 100}, "ttl": 3600}``.
        `org_yaml` is the chart's text as written, stored with the run (an OrgChart given
        without it is stored as the text it was parsed from, or as it serializes).
        """
        if not isinstance(org, OrgChart):
            path = Path(org)
            org = load_org(path)
            org_yaml = path.read_text(encoding="utf-8")
        if self._max_concurrent is None and self._engine is None:
            self._max_concurrent = org.max_concurrent
        if start:
            self.engine.start()
        return self.engine.submit(
            org,
            goal,
            to=to,
            brain=brain,
            brain_options=brain_options,
            workspace=workspace,
            priority=priority,
            language=language,
            org_yaml=org_yaml,
            grant=grant,
        )

    def run(
        self,
        org: OrgChart | str | Path,
        goal: str,
        *,
        timeout: float | None = None,
        **submit_options: Any,
    ) -> Task:
        """Submit a goal and work it to the end; returns the finished root task."""
        root = self.submit(org, goal, **submit_options)
        return self.run_until(root.id, timeout=timeout)

    def run_until(self, task_id: str, timeout: float | None = None) -> Task:
        return self.engine.run_until(task_id, timeout=timeout)

    def run_until_idle(self, timeout: float | None = None) -> None:
        self.engine.run_until_idle(timeout=timeout)

    def resume(self, timeout: float | None = None) -> list[Task]:
        """Continue every open run in the store; returns their root tasks when all have ended."""
        roots = self.store.open_run_ids()
        return [self.run_until(r, timeout=timeout) for r in roots]

    def cancel(self, task_id: str, reason: str = "cancelled by the user") -> list[str]:
        """Cancel a task and its open subtree; returns the ids of the tasks cancelled."""
        if self._engine is not None:
            return self._engine.cancel(task_id, reason)
        return self.store.cancel(task_id, reason)

    def revoke(self, task_id: str, reason: str = "revoked by the user") -> list[str]:
        """Revoke a task's authority and its subtree's; returns the ids of the tasks revoked."""
        if self._engine is not None:
            return self._engine.revoke(task_id, reason)
        return self.store.revoke(task_id, reason)

    # --- the audit trail -----------------------------------------------------------------

    def audit_key(self) -> AuditKey:
        """The company's signing key pair (made on first use beside the database)."""
        return load_or_create_key(key_dir_for(self.store.url))

    def export_audit(self, task_id: str) -> dict[str, Any]:
        """The signed audit bundle of a task's tree (see firm.audit.export)."""
        return export_bundle(self.store, task_id, self.audit_key())

    # --- reading -------------------------------------------------------------------------

    def task(self, task_id: str) -> Task:
        return self.store.get_task(task_id)

    def subtree(self, task_id: str) -> list[Task]:
        return self.store.subtree(task_id)

    def tasks(self, **filters: Any) -> list[Task]:
        return self.store.list_tasks(**filters)

    def events(self, after: int = 0, limit: int = 1000) -> list[Event]:
        return self.store.events_after(after, limit)
