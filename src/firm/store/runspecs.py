"""Runs as records: creating a run (its spec and its root task), reading its spec back, and
the runs still open. (Summaries of past runs for watching them again are in runs.py.)
"""

from __future__ import annotations

import hashlib
import json
from typing import NamedTuple

from sqlalchemy import bindparam, insert, select
from sqlalchemy.exc import IntegrityError

from firm.errors import TaskNotFound
from firm.events import EventKind
from firm.store import queries as Q
from firm.store import schema
from firm.store.base import NewTask, RunSpec
from firm.store.leases import claim_top
from firm.store.prepared import run as run_prepared
from firm.store.retry import retrying
from firm.store.rows import task_from_row
from firm.store.tree import TaskTree
from firm.tasks import Task, new_task_id

T = schema.tasks

# Built once: a statement built per submit was compiled again by every new store's engine
# (~0.5 ms of CPU on the path from a submit to its first session).
_RUN_COLUMNS = ("id", "org_yaml", "org_source", "brain", "brain_options", "workspace", "created_at")
_INSERT_RUN = insert(schema.runs).values({c: bindparam(c) for c in _RUN_COLUMNS})
# Read by each run's first session and by whoever reads a run back (a team's result): built
# once, so a process that opens a new store per run does not compile it per store.
RUN = select(schema.runs).where(schema.runs.c.id == bindparam("id"))


class RootClaim(NamedTuple):
    """A new run's claim for its submitting worker: the lease, and the store's cap."""

    worker_id: str
    lease_seconds: float
    cap: int | None


class Runs(TaskTree):
    def create_run(self, run: RunSpec, root: NewTask, task_id: str | None = None) -> Task:
        # The id is chosen once, outside the retried transaction: if a commit succeeded but
        # its acknowledgement was lost, the retry finds the run instead of making a second one.
        return self._create_run(run, root, task_id or new_task_id(), None)[0]

    def create_run_and_claim(
        self,
        run: RunSpec,
        root: NewTask,
        worker_id: str,
        lease_seconds: float,
        global_limit: int | None = None,
        task_id: str | None = None,
    ) -> tuple[Task, list[Task]]:
        """create_run, and in the same transaction the claim a scheduler would make next for
        one free slot of `worker_id`'s: the head of the queue within the store's cap, so the
        new root starts without a claim of its own, never ahead of waiting work of a higher
        priority (which is claimed instead). Returns the root and the tasks claimed."""
        claim = RootClaim(worker_id, lease_seconds, global_limit)
        return self._create_run(run, root, task_id or new_task_id(), claim)

    @retrying
    def _create_run(
        self, run: RunSpec, root: NewTask, task_id: str, claim: RootClaim | None
    ) -> tuple[Task, list[Task]]:
        try:
            return self._insert_run(run, root, task_id, claim)
        except IntegrityError:
            with self._read() as conn:
                row = conn.execute(select(T).where(T.c.id == task_id)).first()
            if row is None or row._mapping["description"] != root.description:
                raise
            # An earlier attempt committed and its answer was lost: whatever it claimed is
            # left to its lease, and recovered like any claim whose worker never started it.
            return task_from_row(row), []

    def _insert_run(
        self, run: RunSpec, root: NewTask, task_id: str, claim: RootClaim | None
    ) -> tuple[Task, list[Task]]:
        with self._write() as tx:
            run_prepared(
                tx.conn,
                _INSERT_RUN,
                {
                    "id": task_id,
                    "org_yaml": run.org_yaml,
                    "org_source": run.org_source,
                    "brain": run.brain,
                    "brain_options": json.dumps(run.brain_options),
                    "workspace": run.workspace,
                    "created_at": tx.now,
                },
            )
            task = self._insert_task(tx, task_id, task_id, None, root, dedupe_key=None)
            tx.emit(
                EventKind.CREATED,
                task,
                title=task.title,
                description=task.description,
                priority=str(task.priority),
                language=task.language,
                created_by=task.created_by,
                grant=task.grant,
                brain=run.brain,
                org_sha256=hashlib.sha256(run.org_yaml.encode()).hexdigest(),
            )
            # After the root's row (it is in the queue the claim reads) and its `created`
            # entry, as a claim's `started` would come.
            claimed = (
                []
                if claim is None
                else claim_top(tx, claim.worker_id, 1, claim.lease_seconds, claim.cap)
            )
        return task, claimed

    @retrying
    def run(self, run_id: str) -> RunSpec:
        row = self._select(RUN, {"id": run_id}).first()
        if row is None:
            raise TaskNotFound(run_id)
        m = row._mapping
        return RunSpec(
            org_yaml=m["org_yaml"],
            org_source=m["org_source"],
            brain=m["brain"],
            brain_options=json.loads(m["brain_options"]),
            workspace=m["workspace"],
            id=m["id"],
            created_at=m["created_at"],
        )

    @retrying
    def open_run_ids(self) -> list[str]:
        with self._read() as conn:
            return list(
                conn.execute(select(T.c.root_id).distinct().where(Q.is_open(T.c.status))).scalars()
            )
