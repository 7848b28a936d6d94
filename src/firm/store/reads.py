"""Reads: tasks by id, lineage, children, subtree, listings and counts; one snapshot each."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, func, literal, select

from firm.errors import TaskNotFound
from firm.store import queries as Q
from firm.store import runs as run_reads
from firm.store import schema
from firm.store.base import CheckState, Event
from firm.store.retry import retrying
from firm.store.rows import STATUS, task_from_row
from firm.store.tree import TaskTree
from firm.tasks import Status, Task

T = schema.tasks

# What a check reads of its task's row, with the log's head in the same statement (one
# snapshot): a lifecycle call's check, and a tool call's inside its own write (checked.py).
STATE_AT_HEAD = select(
    select(schema.chain_head.c.seq)
    .where(schema.chain_head.c.id == 1)
    .scalar_subquery()
    .label("head_seq"),
    T.c.status,
    T.c.revoked,
    T.c.worker_id,
    (T.c.prompt_tokens + T.c.completion_tokens).label("tokens_used"),
).where(T.c.id == bindparam("id"))


def _subtree():  # type: ignore[no-untyped-def]
    """A task and its descendants, parents first: one recursive statement, built once (a
    team reads its run's tree at every coordinator step and manager turn)."""
    top = select(T.c.id, literal(0).label("depth")).where(T.c.id == bindparam("root"))
    tree = top.cte("subtree", recursive=True)
    child = T.alias("child")
    tree = tree.union_all(
        select(child.c.id, (tree.c.depth + 1).label("depth")).where(child.c.parent_id == tree.c.id)
    )
    return select(T).join(tree, tree.c.id == T.c.id).order_by(tree.c.depth, T.c.created_at, T.c.id)


SUBTREE = _subtree()


class Reads(TaskTree):
    @retrying
    def get_task(self, task_id: str) -> Task:
        row = self._select(Q.TASK, {"id": task_id}).first()
        if row is None:
            raise TaskNotFound(task_id)
        return task_from_row(row)

    @retrying
    def session_state(self, task_id: str) -> tuple[Status, bool, str | None] | None:
        """Status, revoked flag and holding worker: what a running session checks each step."""
        row = self._select(Q.SESSION_STATE, {"id": task_id}).first()
        return (STATUS[row[0]], bool(row[1]), row[2]) if row else None

    @retrying
    def lineage(self, task_id: str) -> tuple[int, list[Task]]:
        """The log's head seq, then the task and its ancestors (nearest first).

        Both come from one statement, so one snapshot: a revocation not in the rows was
        committed after the head, so "not revoked as of seq N" is a claim the log can back.
        """
        rows = self._select(Q.LINEAGE, {"task_id": task_id}).all()
        if not rows:
            raise TaskNotFound(task_id)
        return rows[0]._mapping["head_seq"], [task_from_row(r) for r in rows]

    @retrying
    def state_at_head(self, task_id: str) -> CheckState:
        """The log's head seq and what a check needs of the task's row, in one statement.

        Enough, once the ancestors are known, to know a task still stands: cancel and revoke
        stamp every row of the subtree they end, so an ancestor's revocation or cancel shows
        on this row too, and grants (hence expiries) do not change once a task exists.
        """
        return check_state(task_id, self._select(STATE_AT_HEAD, {"id": task_id}).first())

    @retrying
    def children(self, task_id: str) -> list[Task]:
        rows = self._select(Q.CHILDREN, {"id": task_id}).all()
        return [task_from_row(r) for r in rows]

    @retrying
    def subtree(self, task_id: str) -> list[Task]:
        """The task and all its descendants, parents before children."""
        rows = self._select(SUBTREE, {"root": task_id}).all()
        if not rows:
            raise TaskNotFound(task_id)
        return [task_from_row(r) for r in rows]

    @retrying
    def task_ids_with_prefix(self, prefix: str, limit: int = 2) -> list[str]:
        """Ids that start with `prefix` (at most `limit`): what a short id may stand for."""
        q = select(T.c.id).where(T.c.id.startswith(prefix, autoescape=True))
        with self._read() as conn:
            return [row[0] for row in conn.execute(q.order_by(T.c.id).limit(limit))]

    @retrying
    def list_tasks(
        self,
        *,
        status: str | None = None,
        assignee: str | None = None,
        root_id: str | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[Task]:
        q = select(T)
        if status:
            q = q.where(T.c.status == status)
        if assignee:
            q = q.where(T.c.assignee == assignee)
        if root_id:
            q = q.where(T.c.root_id == root_id)
        q = q.order_by(T.c.created_at, T.c.id).limit(limit).offset(offset)
        with self._read() as conn:
            return [task_from_row(r) for r in conn.execute(q)]

    @retrying
    def run_summaries(self, limit: int = 50, offset: int = 0) -> list[run_reads.RunSummary]:
        """Goals newest first with their trees' counts and usage (store/runs.py)."""
        with self._read() as conn:
            return run_reads.run_summaries(conn, limit, offset)

    @retrying
    def run_events(self, run_id: str, after: int = 0, limit: int = 1000) -> list[Event]:
        """One goal's tree's events after seq, in order; TaskNotFound if it is no goal."""
        with self._read() as conn:
            if not run_reads.is_run(conn, run_id):
                raise TaskNotFound(run_id)
            return run_reads.run_events(conn, run_id, after, limit)

    @retrying
    def has_open_work(self, root_id: str) -> bool:
        """Whether a task of the run is todo (and not held by a plan) or in progress: work a
        worker can take or is doing. One indexed seek, whatever the run's size."""
        return bool(self._select(Q.OPEN_WORK, {"root_id": root_id}).scalar())

    @retrying
    def counts(self, root_id: str | None = None) -> dict[str, int]:
        """Tasks by status; `todo` subtasks waiting for their plan's approval are counted
        apart, as `held` (no worker can take them, so they are not work to wait for)."""
        held = T.c.held_by_plan.is_not(None)
        q = select(T.c.status, held, func.count()).group_by(T.c.status, held)
        if root_id:
            q = q.where(T.c.root_id == root_id)
        out: dict[str, int] = {}
        with self._read() as conn:
            for s, is_held, n in conn.execute(q):
                _tally(out, s, is_held, n)
        return out

    @retrying
    def counts_by_root(self, root_ids: list[str]) -> dict[str, dict[str, int]]:
        """counts(root) for each of these goals, in one statement (a goal with no tasks is
        left out)."""
        if not root_ids:
            return {}
        held = T.c.held_by_plan.is_not(None)
        q = (
            select(T.c.root_id, T.c.status, held, func.count())
            .where(T.c.root_id.in_(root_ids))
            .group_by(T.c.root_id, T.c.status, held)
        )
        out: dict[str, dict[str, int]] = {}
        with self._read() as conn:
            for root, s, is_held, n in conn.execute(q):
                _tally(out.setdefault(root, {}), s, is_held, n)
        return out


def check_state(task_id: str, row: Any) -> CheckState:
    """A CheckState from a row of STATE_AT_HEAD; TaskNotFound when there was none."""
    if row is None:
        raise TaskNotFound(task_id)
    head, status, revoked, worker_id, used = row
    return CheckState(head, STATUS[status], bool(revoked), worker_id, used or 0)


def _tally(out: dict[str, int], status: str, is_held: bool, n: int) -> None:
    """Add n tasks of a status to counts; held todo subtasks are counted as `held`."""
    key = "held" if is_held and status == Status.TODO else status
    out[key] = out.get(key, 0) + n
