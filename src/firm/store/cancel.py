"""Cancel and revoke: one statement over a whole subtree, under the lock order, and one log
entry for it (firm/endings.py): the rows it ended are stamped with that entry's seq."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import (
    ColumnElement,
    bindparam,
    case,
    column,
    false,
    func,
    literal_column,
    select,
    text,
    true,
    update,
)

from firm.endings import ended_sha256
from firm.errors import TaskNotFound
from firm.events import EventKind
from firm.store import schema
from firm.store.approvals import APPROVED, PENDING
from firm.store.latecheckpoint import big_write
from firm.store.plans import Plans
from firm.store.prepared import run
from firm.store.queries import OPEN_VALUES
from firm.store.retry import retrying
from firm.store.transaction import Tx
from firm.tasks import Status

T = schema.tasks
E = schema.events
A = schema.approvals
HEAD = schema.chain_head


def _seq_of_next(tx: Tx, later: int = 0) -> ColumnElement[Any]:
    """The seq the transaction's next entry (plus `later`) will have, as SQL to stamp rows with.

    Entries take their seq at commit, after the head; before this commit's append come the
    entries of the group's earlier members and this transaction's own pending ones. The head
    cannot move in between: on PostgreSQL the subquery locks its row until the commit (the
    lock every append takes last, so the order of locks is unchanged); SQLite's write
    transaction holds the whole file."""
    head = select(HEAD.c.seq).where(HEAD.c.id == 1)
    if tx.locking:
        head = head.with_for_update()
    return head.scalar_subquery() + (tx.ahead + len(tx.pending) + 1 + later)


def _top_sql(join_strings: str, parent_id: str) -> str:
    """What a cancel's top row brings besides its id, as one text `_top_of` reads: what
    would otherwise be statements of their own, as one text (each column more would cost
    every row a comparison; callgrind: ~5% of the cancel for three): the tasks of the calls
    and questions open in the whole store (the few there are, by an index on status), the
    top's parent (`parent_id`, SQL), and whether that parent waits (only then can the wake
    rule fire), joined by '|'. Spelled out, tables named: SQLAlchemy writes SQLite's
    RETURNING without them."""
    return (
        f"(SELECT coalesce({join_strings}(a.task_id, ' '), '') FROM approvals AS a"
        f" WHERE a.status IN ('{PENDING}', '{APPROVED}'))"
        f" || '|' || coalesce({parent_id}, '') || '|' || CASE WHEN EXISTS"
        " (SELECT 1 FROM tasks AS up"
        f" WHERE up.id = {parent_id} AND up.status = '{Status.WAITING}')"
        " THEN 'waits' ELSE '' END"
    )


def _top_only(join_strings: str) -> ColumnElement[Any]:
    """`_top_sql` on the cancel's top row, NULL on every other row it ends."""
    top: ColumnElement[str] = literal_column(_top_sql(join_strings, "tasks.parent_id"))
    return case((T.c.id == bindparam("p_id"), top))


# The statements of SQLite's cancel are written as SQL, not built: SQLAlchemy's compiling of
# them cost each process's first cancel ~4 ms of CPU (a `firm cancel` pays it every time),
# and they are SQLite's own (rowid, json_each, group_concat). Their statuses come from the
# same constants as the open index's predicate (schema.is_open), which a run's side must
# repeat in the index's own terms for SQLite to use it.
_OPEN_LIST = ", ".join(f"'{s}'" for s in sorted(OPEN_VALUES))
_IS_OPEN = " OR ".join(f"tasks.status = '{s}'" for s in sorted(OPEN_VALUES))

# The open subtree a cancel ends, on SQLite: its first row the count, rowids and ids of the
# open tasks of the run the task is the root of (none for any other task) and what the task
# brings when it is open itself (`_top_sql`); then one row per level of the walk below any
# other task (none for a root), which `_found` joins to the first.
#
# A run's root: its subtree is its run (a task's root_id is its run's, and only a root's id
# is a root_id), so its open tasks are a seek on the open index, (status, run, parent), with
# no walk (the walk starts only from a task that has a parent). Any other task: the walk down
# its subtree. Every child is followed, ended or not: a task that ended may still have open
# subtasks (a manager may complete, or fail, with reports still at work), and those are
# cancelled too. The two sides never share a row; each finds nothing for the other for the
# price of one seek.
#
# The walk goes a level at a time, not a task at a time: each level is one row, the ids of
# all its tasks as a JSON array (whose children the next level looks up, json_each feeding
# the parent index), then, after a char(1) each (JSON escapes it, and a count or a rowid has
# none), how many of them are open, their rowids and their ids (last, so any id reads back as
# it is). A task at a time, SQLite keeps every row of the walk in a queue table of its own
# and copies each column through two co-routines; a level at a time, 10,001 tasks below a
# goal cost the SELECT 124 → 85 M instructions (callgrind), and a goal's own side, now one
# aggregate with its top row's extras read once instead of tested on every row, 34 → 22 M.
#
# A SELECT, and the UPDATE by rowid after it (`CANCEL_ROWS`, `CANCEL_RANGE`), not one
# UPDATE … RETURNING: SQLite runs RETURNING as a trigger program per row and keeps the rows
# in a table of its own until the UPDATE ends; a SELECT hands them over as it reads them.
# The write transaction holds the whole file, so nothing can change between the two.
#
# A few rows, not one per task: each row fetched costs the driver a step with the interpreter
# lock let go and taken back, and a tuple, an int and a str in Python; the aggregates cost
# SQLite a fraction of that.
_WALK_OPEN = f"c.status IN ({_OPEN_LIST})"
CANCEL = text(
    "WITH RECURSIVE level(s) AS ("
    " SELECT json_array(tasks.id) || char(1) || (tasks.status IN"
    f" ({_OPEN_LIST})) || char(1) || CASE WHEN tasks.status IN ({_OPEN_LIST})"
    " THEN tasks.rowid || char(1) || tasks.id ELSE char(1) END"
    " FROM tasks WHERE tasks.id = :p_id AND tasks.parent_id IS NOT NULL"
    " UNION ALL"
    " SELECT (SELECT json_group_array(c.id) || char(1)"
    f" || count(CASE WHEN {_WALK_OPEN} THEN 1 END) || char(1)"
    f" || coalesce(group_concat(CASE WHEN {_WALK_OPEN} THEN c.rowid END), '') || char(1)"
    f" || coalesce(group_concat(CASE WHEN {_WALK_OPEN} THEN c.id END, ' '), '')"
    " FROM json_each(substr(level.s, 1, instr(level.s, char(1)) - 1)) AS p, tasks AS c"
    " WHERE c.parent_id = p.value)"
    " FROM level WHERE substr(level.s, 1, 3) <> '[]' || char(1))"
    " SELECT count(*), group_concat(tasks.rowid), group_concat(tasks.id, ' '),"
    f" (SELECT {_top_sql('group_concat', 'top.parent_id')} FROM tasks AS top"
    f" WHERE top.id = :p_id AND ({_IS_OPEN.replace('tasks.', 'top.')}))"
    f" FROM tasks WHERE tasks.root_id = :p_id AND tasks.status IN ({_OPEN_LIST})"
    f" AND ({_IS_OPEN})"
    " UNION ALL SELECT NULL, NULL, NULL, level.s FROM level"
).columns(column("n"), column("rowids"), column("ids"), column("top"))
# The rows the SELECT found, by rowid (a JSON array: one prebuilt statement for any count).
# Their seq is the head's plus `p_offset` (the entries ahead of this one): the write
# transaction holds the whole file, so the head read here is the one the entry follows.
#
# OR FAIL: SQLite keeps a statement journal for a statement that writes many rows and may
# abort on a constraint (the NOT NULL status and updated_at it sets), so as to undo that
# statement alone: a copy of every page the UPDATE changes, spilled past 64 KiB to a temporary
# file (a 10,001-task cancel: ~650 pages, 1,300 writes to it, ~3.5 ms of the UPDATE's 18).
# Undoing the statement alone is nothing the cancel needs: any error in it fails the whole
# write, whose transaction (or, in a group, savepoint) is rolled back.
_SET = (
    f"UPDATE OR FAIL tasks SET status = '{Status.CANCELLED}', error = :p_reason,"
    " finished_at = :p_now, updated_at = :p_now, lease_expires_at = NULL,"
    " cancelled_by_seq = (SELECT chain_head.seq FROM chain_head WHERE chain_head.id = 1)"
    " + :p_offset WHERE "
)
_BY_ROWID = "tasks.rowid IN (SELECT value FROM json_each(:p_rows))"
CANCEL_ROWS = text(_SET + _BY_ROWID)
# The same when the rowids found are one run of consecutive ones (n of them from lo to
# lo + n - 1: every rowid between is one found), as a subtree's are when none of it has
# ended yet and no other task was added between its delegations (each adds its tasks in one
# statement; the benchmark's subtrees): a range of the table, where the list costs SQLite a
# sorted table of its own, built row by row, and a lookup of each (callgrind, 10,001 tasks:
# the UPDATE 230 → 200 M instructions; reading the list in Python to tell costs ~10 M).
CANCEL_RANGE = text(_SET + "tasks.rowid BETWEEN :p_lo AND :p_hi")
# Their ids, for ids with a space in them, which the text CANCEL joins cannot tell apart
# (firm's never have one; a caller may choose a root's).
CANCEL_IDS = text(f"SELECT tasks.id FROM tasks WHERE {_BY_ROWID}").columns(column("id"))


def _found(rows: list[Any]) -> tuple[int, str, str, str | None]:
    """CANCEL's rows as one: how many, their rowids (a JSON array), their ids joined by
    spaces, and what the top row brought (None when the task itself was not open)."""
    first, *levels = rows
    n, top = first[0], first[3]
    rowids, ids = ([first[1]], [first[2]]) if n else ([], [])
    for _, _, _, level in levels:
        _, count, level_rowids, level_ids = level.split("\x01", 3)
        if count != "0":
            n += int(count)
            rowids.append(level_rowids)
            ids.append(level_ids)
    return n, "[" + ",".join(rowids) + "]", " ".join(ids), top


class Cancellation(Plans):
    @retrying
    def cancel(self, task_id: str, reason: str, by: str = "user") -> list[str]:
        """Cancel the task and its open subtree; returns the ids cancelled (sorted)."""
        with big_write(self._late) as big, self._write() as tx:
            if tx.locking:
                parent_id, sub = self._lock_subtree(tx, task_id, open_only=True)
                # Driven by the subtree alone: its walk keeps only the open tasks (in this
                # statement's snapshot, and their rows are locked). A second walk, not the
                # locking statement's rows: a statement's snapshot is taken before it waits
                # for its locks, so only a statement after them sees what a transaction
                # holding one of those rows committed meanwhile (a settle that ended a task,
                # a delegation that added subtasks under one).
                ended = (
                    update(T)
                    .where(T.c.id.in_(select(sub.c.id)))
                    .values(
                        status=str(Status.CANCELLED),
                        error=reason,
                        finished_at=tx.now,
                        updated_at=tx.now,
                        lease_expires_at=None,
                        cancelled_by_seq=_seq_of_next(tx),
                    )
                    .returning(T.c.id, _top_only("string_agg").label("top"))
                    .cte("ended")
                )
                # One row back, not one per task (the client's CPU for 10,001: ~20 → ~5 ms):
                # the ids as an array, which names any id as it is.
                n, ids, extra = tx.conn.execute(
                    select(func.count(), func.array_agg(ended.c.id), func.max(ended.c.top)),
                    {"p_id": task_id},
                ).one()
                cancelled = sorted(ids) if n else []
                top = _top_of(extra)
            else:
                # SQLite's write transaction holds the whole file: nothing to lock first.
                n, rowids, joined, extra = _found(run(tx.conn, CANCEL, {"p_id": task_id}).all())
                parent_id = None
                cancelled, top = [], None
                if n:
                    cancelled = joined.split(" ")
                    if len(cancelled) != n:  # an id with a space in it
                        cancelled = run(tx.conn, CANCEL_IDS, {"p_rows": rowids}).scalars()
                    cancelled.sort()
                    top = _top_of(extra)
                    big.rows(n, tx.conn)
                    args = {
                        "p_rows": rowids,
                        "p_reason": reason,
                        "p_now": tx.now,
                        "p_offset": tx.ahead + len(tx.pending) + 1,
                    }
                    found = json.loads(rowids)
                    lo, hi = min(found), max(found)
                    args["p_lo"], args["p_hi"] = lo, hi
                    run(tx.conn, CANCEL_RANGE if hi - lo + 1 == n else CANCEL_ROWS, args)
            if top is None:
                # The task itself was not open (or is not there): what its row would have
                # brought is read apart.
                if not tx.locking:
                    parent_id = self._parent_of(tx, task_id)
                asking = self._asking(tx, cancelled)
                wake = bool(cancelled)
            else:
                open_calls, parent_id, wake = top
                asking = _of(cancelled, open_calls)
            if cancelled:
                data = {"reason": reason, "by": by, "ended": len(cancelled)}
                data["ended_sha256"] = ended_sha256(cancelled)
                tx.emit(EventKind.CANCELLED, task_id, None, **data)
                self._withdraw(tx, asking, by)
                if wake:
                    self._wake_if_done(tx, parent_id)
        return cancelled

    @retrying
    def revoke(self, task_id: str, reason: str, by: str = "user") -> list[str]:
        """Revoke a task's authority and its whole subtree's, in one statement.

        Every task in the subtree is marked revoked (terminal ones too: the flag is a fact about
        authority, which the audit trail relies on); the open ones are also cancelled, so their
        sessions stop at their next step. Two entries say so, on the task: `revoked` (the
        cascade down the tree is the verifier's to recompute) and one `cancelled` for those it
        ended. Returns the ids newly revoked (sorted).
        """
        with big_write(self._late) as big, self._write() as tx:
            parent_id, sub = self._lock_subtree(tx, task_id, open_only=False)
            was_open = T.c.status.in_(OPEN_VALUES)
            rows = tx.conn.execute(
                update(T)
                .prefix_with("OR FAIL", dialect="sqlite")  # no statement journal, as CANCEL_ROWS
                .where(T.c.id.in_(select(sub.c.id)), T.c.revoked == false())
                .values(
                    revoked=true(),
                    status=case((was_open, str(Status.CANCELLED)), else_=T.c.status),
                    error=case((was_open, f"revoked: {reason}"), else_=T.c.error),
                    finished_at=case((was_open, tx.now), else_=T.c.finished_at),
                    lease_expires_at=case((was_open, None), else_=T.c.lease_expires_at),
                    # the `cancelled` entry comes second, after `revoked`
                    cancelled_by_seq=case(
                        (was_open, _seq_of_next(tx, later=1)), else_=T.c.cancelled_by_seq
                    ),
                    updated_at=tx.now,
                )
                .returning(T.c.id, T.c.status, T.c.finished_at)
            ).all()
            big.rows(len(rows), tx.conn)
            revoked = sorted(r.id for r in rows)
            # RETURNING shows new rows: those cancelled now finished now
            ended = sorted(
                r.id for r in rows if r.status == Status.CANCELLED and r.finished_at == tx.now
            )
            if revoked:
                tx.emit(
                    EventKind.REVOKED,
                    task_id,
                    None,
                    reason=reason,
                    by=by,
                    origin=task_id,
                    revoked=len(revoked),
                )
                said = {"reason": f"revoked: {reason}", "by": by, "ended": len(ended)}
                said["ended_sha256"] = ended_sha256(ended)
                tx.emit(EventKind.CANCELLED, task_id, None, **said)
                self._withdraw(tx, self._asking(tx, ended), by)
                self._wake_if_done(tx, parent_id)
        return revoked

    def _parent_of(self, tx: Tx, task_id: str) -> str | None:
        head = tx.conn.execute(select(T.c.parent_id).where(T.c.id == task_id)).first()
        if head is None:
            raise TaskNotFound(task_id)
        return head[0]

    def ended_by(self, seq: int) -> list[str]:
        """The ids a subtree's `cancelled` entry at `seq` ended, sorted (its digest's order):
        found down the subtree of the entry's task (the rows it ended are all there), so no
        index on the stamp is kept up by every cancelled row."""
        with self._read() as conn:
            top = conn.execute(select(E.c.task_id).where(E.c.seq == seq)).scalar()
            if top is None:
                return []
            sub = self._subtree_ids(top, open_only=False).subquery()
            q = select(T.c.id).where(T.c.id.in_(select(sub.c.id)), T.c.cancelled_by_seq == seq)
            return sorted(conn.execute(q).scalars())

    def last_cancel_over(self, task_id: str) -> int | None:
        """The seq of the last subtree cancel that ended a task of this subtree (its entry may
        sit on an ancestor, after the subtree's own last entry), or None."""
        sub = self._subtree_ids(task_id, open_only=False).subquery()
        q = select(func.max(T.c.cancelled_by_seq)).where(T.c.id.in_(select(sub.c.id)))
        with self._read() as conn:
            return conn.execute(q).scalar()

    def _asking(self, tx: Tx, task_ids: list[str]) -> list[str]:
        """Of these tasks, those with a call or question still open (to be withdrawn). The
        open ones are few in the whole store (an index on status finds them), so they are
        listed and matched here instead of sending every task id of a big subtree."""
        if not task_ids:
            return []
        open_now = select(A.c.task_id).where(A.c.status.in_([PENDING, APPROVED]))
        asking = set(tx.conn.execute(open_now).scalars())
        return [t for t in task_ids if t in asking] if asking else []


def _top_of(extra: str | None) -> tuple[str, str | None, bool] | None:
    """What a cancel's top row brought (`_top`): the open calls' task ids, the parent's id,
    whether the parent waits; None when the task itself was not open."""
    if extra is None:
        return None
    asking, parent_id, waits = extra.split("|")
    return asking, parent_id or None, waits == "waits"


def _of(cancelled: list[str], open_calls: str) -> list[str]:
    """The cancelled tasks among those with a call or question still open."""
    asking = set(open_calls.split())
    return [t for t in cancelled if t in asking] if asking else []
