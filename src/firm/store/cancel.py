"""Cancel and revoke: one statement over a whole subtree, under the lock order."""

from __future__ import annotations

from sqlalchemy import case, false, select, true, update

from firm.events import EventKind
from firm.store import schema
from firm.store.approvals import APPROVED, PENDING
from firm.store.plans import Plans
from firm.store.queries import OPEN_VALUES
from firm.store.retry import retrying
from firm.store.rows import task_from_row
from firm.store.transaction import Tx
from firm.tasks import Status, Task

T = schema.tasks
A = schema.approvals


class Cancellation(Plans):
    @retrying
    def cancel(self, task_id: str, reason: str, by: str = "user") -> list[Task]:
        with self._write() as tx:
            parent_id, sub = self._lock_subtree(tx, task_id, open_only=True)
            rows = tx.conn.execute(
                update(T)
                .where(T.c.id.in_(select(sub.c.id)), T.c.status.in_(OPEN_VALUES))
                .values(
                    status=str(Status.CANCELLED),
                    error=reason,
                    finished_at=tx.now,
                    updated_at=tx.now,
                    lease_expires_at=None,
                )
                .returning(*T.c)
            ).all()
            cancelled = [task_from_row(r) for r in rows]
            # One entry per task, all sharing one data object: its JSON is made, checked and
            # digested once for the whole subtree (Tx.flush).
            said = {"reason": reason, "by": by}
            tx.pending.extend((EventKind.CANCELLED, t.id, t.assignee, said) for t in cancelled)
            self._withdraw(tx, self._asking(tx, cancelled), by)
            if cancelled:
                self._wake_if_done(tx, parent_id)
        return cancelled

    @retrying
    def revoke(self, task_id: str, reason: str, by: str = "user") -> list[Task]:
        """Revoke a task's authority and its whole subtree's, in one statement.

        Every task in the subtree is marked revoked (terminal ones too: the flag is a fact about
        authority, which the audit trail relies on); the open ones are also cancelled, so their
        sessions stop at their next step. Returns the tasks newly revoked.
        """
        with self._write() as tx:
            parent_id, sub = self._lock_subtree(tx, task_id, open_only=False)
            was_open = T.c.status.in_(OPEN_VALUES)
            rows = tx.conn.execute(
                update(T)
                .where(T.c.id.in_(select(sub.c.id)), T.c.revoked == false())
                .values(
                    revoked=true(),
                    status=case((was_open, str(Status.CANCELLED)), else_=T.c.status),
                    error=case((was_open, f"revoked: {reason}"), else_=T.c.error),
                    finished_at=case((was_open, tx.now), else_=T.c.finished_at),
                    lease_expires_at=case((was_open, None), else_=T.c.lease_expires_at),
                    updated_at=tx.now,
                )
                .returning(*T.c)
            ).all()
            revoked = [task_from_row(r) for r in rows]
            said = {"reason": reason, "by": by, "origin": task_id}  # shared, as in cancel
            tx.pending.extend((EventKind.REVOKED, t.id, t.assignee, said) for t in revoked)
            ended = {"reason": f"revoked: {reason}", "by": by}
            tx.pending.extend(  # RETURNING shows new rows: those cancelled now finished now
                (EventKind.CANCELLED, t.id, t.assignee, ended)
                for t in revoked
                if t.status == Status.CANCELLED and t.finished_at == tx.now
            )
            self._withdraw(tx, self._asking(tx, revoked), by)
            if revoked:
                self._wake_if_done(tx, parent_id)
        return revoked

    def _asking(self, tx: Tx, tasks: list[Task]) -> list[str]:
        """Of these tasks, those with a call or question still open (to be withdrawn). The
        open ones are few in the whole store (an index on status finds them), so they are
        listed and matched here instead of sending every task id of a big subtree."""
        if not tasks:
            return []
        open_now = select(A.c.task_id).where(A.c.status.in_([PENDING, APPROVED]))
        asking = set(tx.conn.execute(open_now).scalars())
        return [t.id for t in tasks if t.id in asking]
