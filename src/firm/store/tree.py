"""The task tree under the lock order: a task with its parent, a whole subtree, the wake rule,
and inserting a task row. Shared by every write that changes tasks.
"""

from __future__ import annotations

import json

from sqlalchemy import Connection, bindparam, func, insert, literal, null, select

from firm.errors import TaskNotFound
from firm.events import EventKind
from firm.store import queries as Q
from firm.store import schema
from firm.store.base import NewTask
from firm.store.connection import SqlBase
from firm.store.prepared import run, run_many
from firm.store.queries import OPEN_VALUES
from firm.store.rows import task_from_row
from firm.store.transaction import Tx
from firm.tasks import Priority, Status, Task

T = schema.tasks

# The parent's row, locked, in one statement: the parent's id is read inside it. (PostgreSQL
# locks only the outer query's rows, so the child is not locked here, before its parent.)
_P = T.alias("p")
LOCK_PARENT = (
    select(T.c.id)
    .where(T.c.id == select(_P.c.parent_id).where(_P.c.id == bindparam("id")).scalar_subquery())
    .with_for_update(of=T)
)
# Without RETURNING: the row is what was bound, so the task is built from the values, and a
# reply's delegations go in as one executemany. The columns a new task always leaves empty
# are NULL in the SQL itself: sqlite3 binds a None through its adapter lookup (~3 k
# instructions each, seven a task).
_EMPTY_WHEN_NEW = (
    "result",
    "error",
    "started_at",
    "finished_at",
    "worker_id",
    "lease_expires_at",
    "cancelled_by_seq",
)
INSERT_TASK_ROW = insert(T).values(
    {c.name: null() if c.name in _EMPTY_WHEN_NEW else bindparam(f"p_{c.name}") for c in T.c}
)


class TaskTree(SqlBase):
    """Helpers for writes that lock a task, its family or its subtree."""

    def _lock_task(self, tx: Tx, task_id: str) -> Task | None:
        q = Q.TASK_FOR_UPDATE if tx.locking else Q.TASK
        row = run(tx.conn, q, {"id": task_id}).first()
        return task_from_row(row) if row else None

    def _lock_family(self, tx: Tx, task_id: str) -> Task:
        """The task, read under the lock order: on PostgreSQL its parent's row is locked
        first (parent before child, everywhere); SQLite's transaction holds the whole file."""
        self._lock_parent(tx, task_id)  # none locked: a root task, or no such task
        task = self._lock_task(tx, task_id)
        if task is None:
            raise TaskNotFound(task_id)
        return task

    def _lock_parent(self, tx: Tx, task_id: str) -> None:
        """Before a write that changes a task by its id alone (a settle's guarded UPDATE): on
        PostgreSQL the parent's row, so the lock order stays parent before child. SQLite's
        transaction holds the whole file."""
        if tx.locking:
            run(tx.conn, LOCK_PARENT, {"id": task_id}).first()

    def _open_children(self, conn: Connection, parent_id: str) -> int:
        return run(conn, Q.OPEN_CHILDREN, {"id": parent_id}).scalar_one()

    def _wake_if_done(self, tx: Tx, parent_id: str | None) -> list[str]:
        """The wake rule: a waiting task whose subtasks are all terminal goes back to todo.

        Called inside the transaction that made a subtask terminal, holding the parent's row
        lock, so two subtasks finishing at once cannot both see the other still open (inv. 1).
        """
        if parent_id is None:
            return []
        woke = run(tx.conn, Q.WAKE, {"p_parent": parent_id, "p_now": tx.now}).all()
        for task_id, assignee in woke:
            tx.emit(EventKind.WOKEN, task_id, assignee)
        return [w[0] for w in woke]

    def _lock_subtree(self, tx: Tx, task_id: str, open_only: bool):  # type: ignore[no-untyped-def]
        """Before changing a whole subtree: its parent's row, then (PostgreSQL) the subtree's
        rows top-down — the lock order settle uses. Returns the parent's id and the subtree."""
        head = run(tx.conn, Q.PARENT_OF, {"id": task_id}).first()
        if head is None:
            raise TaskNotFound(task_id)
        parent_id = head[0]
        if parent_id is not None:
            self._lock_task(tx, parent_id)
        sub = self._subtree_ids(task_id, open_only=open_only).subquery()
        if tx.locking:
            # Counted, not returned: the rows are locked in this order all the same (the
            # locking sits above the sort), and 10,000 ids need not travel back.
            locked = (
                select(T.c.id)
                .join(sub, sub.c.id == T.c.id)
                .order_by(sub.c.depth, T.c.id)
                .with_for_update(of=T)
                .subquery()
            )
            tx.conn.execute(select(func.count()).select_from(locked))
        return parent_id, sub

    def _subtree_ids(self, root_id: str, open_only: bool):  # type: ignore[no-untyped-def]
        """A recursive CTE over the subtree: one statement whatever its size."""
        base = select(T.c.id, T.c.status, literal(0).label("depth")).where(T.c.id == root_id)
        tree = base.cte("subtree", recursive=True)
        child = T.alias("child")
        tree = tree.union_all(
            select(child.c.id, child.c.status, (tree.c.depth + 1).label("depth")).where(
                child.c.parent_id == tree.c.id
            )
        )
        q = select(tree.c.id, tree.c.depth)
        if open_only:
            q = q.where(tree.c.status.in_(OPEN_VALUES))
        return q

    def _insert_task(
        self,
        tx: Tx,
        task_id: str,
        root_id: str,
        parent_id: str | None,
        new: NewTask,
        dedupe_key: str | None,
    ) -> Task:
        values, task = self._task_row(tx, task_id, root_id, parent_id, new, dedupe_key)
        self._insert_rows(tx, [values])
        return task

    def _insert_rows(self, tx: Tx, rows: list[dict[str, object]]) -> None:
        """Task rows made by `_task_row`, in one statement (an executemany)."""
        if rows:
            run_many(tx.conn, INSERT_TASK_ROW, rows)

    def _task_row(
        self,
        tx: Tx,
        task_id: str,
        root_id: str,
        parent_id: str | None,
        new: NewTask,
        dedupe_key: str | None,
        order: int = 0,
    ) -> tuple[dict[str, object], Task]:
        """A new task's row (its bound values) and the task it is."""
        # The n-th task a transaction creates is n microseconds younger than the first: tasks
        # delegated together (one model reply) keep their order on the board and in the queue.
        created = tx.now + order * 1e-6
        grant = json.dumps(new.grant) if new.grant is not None else None
        task = Task(
            id=task_id,
            root_id=root_id,
            parent_id=parent_id,
            title=new.title,
            description=new.description,
            status=Status.TODO,
            assignee=new.assignee,
            created_by=new.created_by,
            priority=Priority(int(new.priority)),
            language=new.language,
            result=None,
            files=(),
            error=None,
            created_at=created,
            updated_at=tx.now,
            started_at=None,
            finished_at=None,
            turn=0,
            attempts=0,
            grant=json.loads(grant) if grant is not None else None,
            revoked=False,
            worker_id=None,
            lease_expires_at=None,
            usage={"calls": 0, "prompt_tokens": 0, "completion_tokens": 0},
        )
        values: dict[str, object] = {
            "p_id": task_id,
            "p_root_id": root_id,
            "p_parent_id": parent_id,
            "p_title": new.title,
            "p_description": new.description,
            "p_status": str(Status.TODO),
            "p_assignee": new.assignee,
            "p_created_by": new.created_by,
            "p_priority": int(new.priority),
            "p_language": new.language,
            "p_files": "[]",
            "p_created_at": created,
            "p_updated_at": tx.now,
            "p_turn": 0,
            "p_attempts": 0,
            "p_dedupe_key": dedupe_key,
            "p_grant": grant,
            "p_revoked": False,
            "p_calls": 0,
            "p_prompt_tokens": 0,
            "p_completion_tokens": 0,
            "p_held_by_plan": new.plan,
        }
        return values, task
