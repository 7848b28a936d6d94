"""Delegation and settle: a session adds a subtask, then ends its turn (done, failed or
yielded), waking its parent when it was the last open subtask; and its usage is counted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection, bindparam, func, select
from sqlalchemy.exc import IntegrityError

from firm.chain import canonical_json
from firm.endcall import fold, fold_delegation
from firm.errors import TaskNotFound, TaskNotHeld
from firm.events import EventKind
from firm.store import queries as Q
from firm.store import schema
from firm.store.base import CheckState, DelegateResult, NewTask, PendingEvents, SettleResult
from firm.store.checked import split_at_check
from firm.store.handover import claim_next, reports_of
from firm.store.leases import claim_top
from firm.store.plans import open_plan
from firm.store.prepared import run
from firm.store.reads import STATE_AT_HEAD, check_state
from firm.store.retry import retrying
from firm.store.rows import task_from_row
from firm.store.transaction import Tx
from firm.store.tree import TaskTree
from firm.store.usage import ADD_USAGE
from firm.store.yielding import write_yield
from firm.tasks import Outcome, Status, Task, delegation_key, subtask_id

T = schema.tasks
_Q = T.alias("queued")  # the queue, beside the row a settle changes
YIELD = Outcome.yielded()

# The settle of a task that ended, guarded: it changes the row only while this worker holds it.
# It also says whether the parent's wake is due (queries.WAKE_DUE).
SETTLE_ENDED_HELD = Q.SETTLE_ENDED.where(
    T.c.status == str(Status.IN_PROGRESS), T.c.worker_id == bindparam("p_worker")
).returning(Q.WAKE_DUE)
# The same with the log's head, read by the statement that proves the task still held: where
# an ending call the settle checks is placed (store/checked.SettleChecked).
_HEAD_SEQ = select(schema.chain_head.c.seq).where(schema.chain_head.c.id == 1).scalar_subquery()
SETTLE_ENDED_HELD_AT_HEAD = SETTLE_ENDED_HELD.returning(_HEAD_SEQ)
# SQLite: the same, saying too whether any task waits in the queue (a seek on the claim
# index). A settle that wakes nothing hands its slot to the queue's head (store/handover.py);
# most find the queue empty — a burst of leaves whose reports were all claimed at their
# delegation — and this column spares them the claim's statement.
_QUEUED = (
    select(_Q.c.id)
    .where(schema.claimable(_Q))  # the claim index's terms, read in its order: its first entry
    .order_by(_Q.c.priority.desc(), _Q.c.created_at, _Q.c.id)
    .limit(1)
    .scalar_subquery()
    .is_not(None)
)
SETTLE_ENDED_HELD_QUEUED = SETTLE_ENDED_HELD.returning(_QUEUED)
SETTLE_ENDED_HELD_QUEUED_AT_HEAD = SETTLE_ENDED_HELD_QUEUED.returning(_HEAD_SEQ)
BY_DEDUPE_KEYS = select(T).where(T.c.dedupe_key.in_(bindparam("keys", expanding=True)))
# SQLite: the keys as one JSON array, so the statement is the same for any number of them
# and runs prebuilt (store/prepared.py); an expanding IN is compiled again for each count.
_KEYS = func.json_each(bindparam("keys_json")).table_valued("value")
BY_DEDUPE_KEYS_JSON = select(T).where(T.c.dedupe_key.in_(select(_KEYS.c.value)))


# A model call's usage, built once: each session records one per call, and a statement built
# per call was compiled again for every store a process opened (the compiled cache is per engine).
class Delegation(TaskTree):
    # --- a model call's usage, riding this thread's next write (store/usage.py) -----------

    def owe_usage(
        self, task_id: str, calls: int, prompt_tokens: int, completion_tokens: int
    ) -> None:
        """Usage written by this thread's next write, in its transaction."""
        self._usage.add(task_id, calls, prompt_tokens, completion_tokens)

    def owed_tokens(self, task_id: str) -> int:
        """The task's tokens this thread has recorded and not written yet."""
        return self._usage.tokens(task_id)

    def pay_usage(self) -> None:
        """Write this thread's owed usage now, if it owes any."""
        if self._usage.owed:
            with self._write():
                pass

    def delegate(
        self,
        parent_id: str,
        turn: int,
        new: NewTask,
        events: PendingEvents = (),
        worker_id: str | None = None,
    ) -> DelegateResult:
        """Create a subtask, or return the one this turn already created under the same
        (assignee, normalised title). With worker_id, the parent must still be held by that
        worker: a session cut off by a lost lease cannot add work behind its successor."""
        return self.delegate_many(parent_id, turn, [(events, new)], worker_id)[0]

    @retrying
    def delegate_many(
        self,
        parent_id: str,
        turn: int,
        items: Sequence[tuple[PendingEvents, NewTask]],
        worker_id: str | None = None,
        events: PendingEvents = (),
    ) -> list[DelegateResult]:
        """Several delegations of one turn in one transaction (the delegate_task calls of one
        model reply): each item's entries, then its `delegated` entry, in order, so the log
        reads as if they had been written one by one; then `events`, the session's entries
        owed since (its last delegate_task call's record, in that subtask's `delegated` when
        it comes right after it). Each is idempotent as delegate() is; if the parent is no
        longer held, nothing new is written (TaskNotHeld)."""
        return self._delegate(parent_id, turn, items, worker_id, None, trailing=events)[0]

    @retrying
    def delegate_and_claim(
        self,
        parent_id: str,
        turn: int,
        items: Sequence[tuple[PendingEvents, NewTask]],
        worker_id: str,
        limit: int,
        lease_seconds: float,
        global_limit: int | None = None,
        events: PendingEvents = (),
    ) -> tuple[list[DelegateResult], list[Task]]:
        """delegate_many (with `events` after the delegations, as there), and in the same
        transaction the claim a scheduler would make next
        for `worker_id`'s free slots: up to `limit` tasks, no more than it created, from the
        head of the queue within the store's cap, so the subtasks start without a claim of
        their own and never ahead of waiting work of a higher priority (which is claimed
        instead, in its order). Returns the results and the tasks claimed."""
        claim = _Claim(worker_id, limit, lease_seconds, global_limit)
        return self._delegate(parent_id, turn, items, worker_id, claim, trailing=events)[:2]

    @retrying
    def delegate_and_yield(
        self,
        parent_id: str,
        turn: int,
        items: Sequence[tuple[PendingEvents, NewTask]],
        worker_id: str,
        events: PendingEvents = (),
        hand_over: float | None = None,
        limit: int = 0,
        global_limit: int | None = None,
    ) -> tuple[list[DelegateResult], SettleResult]:
        """delegate_many for a reply that ends its session's turn, with the yield a settle
        would write next in the same transaction: after the delegations' entries, the
        session's own (`events`), then the task `waiting` — or woken at once, when its
        reports are all done already (a replayed reply). Refused with nothing written
        (TaskNotHeld) unless `worker_id` still holds the task. With `hand_over` (lease
        seconds) the slot the session frees is claimed for its worker in the transaction:
        the task woken at once, as a settle's hand-over would; else up to `limit` of the
        queue's head, as delegate_and_claim would (the freed slot counted in `limit`). The
        settle's result carries what was claimed."""
        claim = None if hand_over is None else _Claim(worker_id, limit, hand_over, global_limit)
        results, claimed, ended = self._delegate(parent_id, turn, items, worker_id, claim, events)
        if ended is None:  # lost races twice to identical delegations: they exist now
            settled = self.settle(parent_id, worker_id, YIELD, events, hand_over)
            if not settled.applied:
                raise TaskNotHeld(f"task {parent_id} can no longer end its turn")
            return results, settled
        after, woke = ended
        return results, SettleResult(True, after, woke, claimed)

    def _delegate(
        self,
        parent_id: str,
        turn: int,
        items: Sequence[tuple[PendingEvents, NewTask]],
        worker_id: str | None,
        claim: _Claim | None,
        ending: PendingEvents | None = None,
        trailing: PendingEvents = (),
    ) -> tuple[list[DelegateResult], list[Task], tuple[Task, list[str]] | None]:
        keys = [delegation_key(parent_id, turn, new.assignee, new.title) for _, new in items]
        for _ in range(2):
            try:
                with self._write() as tx:
                    # The parent's lock first: an identical delegation racing this one (a
                    # re-run session on another machine) commits before we look, so we see it.
                    parent = self._lock_task(tx, parent_id)
                    if parent is None:
                        raise TaskNotFound(parent_id)
                    if ending is not None:  # ending the turn needs it held, replay or not
                        _check_held(parent, worker_id)
                    # Every key of the reply looked up at once; a key repeated within the
                    # reply finds the task its first occurrence made.
                    made = self._by_keys(tx.conn, keys)
                    new_rows: list[dict[str, object]] = []
                    results: list[DelegateResult] = []
                    for (events, new), key in zip(items, keys, strict=True):
                        # Written whichever way this goes; the last delegation's call in its
                        # `delegated`, when it comes right after it (firm/endcall.py).
                        tx.pending.extend(fold_delegation(tx.pending, events))
                        existing = made.get(key)
                        if existing is not None:
                            results.append(DelegateResult(existing, created=False))
                            continue
                        _check_held(parent, worker_id)
                        row, task = self._task_row(
                            tx, subtask_id(key), parent.root_id, parent_id, new, key, len(results)
                        )
                        new_rows.append(row)
                        made[key] = task
                        tx.emit(
                            EventKind.DELEGATED,
                            task,
                            new.created_by,
                            to=new.assignee,
                            title=task.title,
                            description=task.description,
                            priority=str(task.priority),
                            language=task.language,
                            parent_id=parent_id,
                            grant=task.grant,
                            **({"plan": new.plan} if new.plan else {}),
                        )
                        results.append(DelegateResult(task, created=True))
                    self._insert_rows(tx, new_rows)
                    tx.pending.extend(fold_delegation(tx.pending, trailing))
                    ended = (
                        None
                        if ending is None
                        else write_yield(tx, parent, YIELD, fold_delegation(tx.pending, ending))
                    )
                    # The claim comes after the rows (they are in the queue it reads) and
                    # its `started` entries after their `delegated` ones, as a claim's would.
                    room = min(claim.limit, len(new_rows)) if claim is not None else 0
                    if claim is not None and ended is not None and ended[1]:
                        claimed = claim_next(tx, ended[1], claim.worker_id, claim.lease_seconds)
                    elif claim is not None and room > 0:
                        claimed = claim_top(
                            tx, claim.worker_id, room, claim.lease_seconds, claim.cap
                        )
                    else:
                        claimed = []
                return results, claimed, ended
            except IntegrityError:
                continue  # lost a race to an identical delegation: read the winner's rows
        if trailing:  # the session's entries are written whichever way this goes
            with self._write() as tx:
                tx.pending.extend(trailing)
        with self._read() as conn:
            rows = conn.execute(select(T).where(T.c.dedupe_key.in_(keys))).all()
        by_key = {row.dedupe_key: task_from_row(row) for row in rows}
        return [DelegateResult(by_key[key], created=False) for key in keys], [], None

    @retrying
    def settle(
        self,
        task_id: str,
        worker_id: str,
        outcome: Outcome,
        events: PendingEvents = (),
        hand_over: float | None = None,
    ) -> SettleResult:
        """Write a session's outcome and wake its parent (or itself) if that is due; with
        `hand_over` (lease seconds), the woken task is claimed for this worker in the same
        transaction (store/handover.py) and returned in `claimed`."""
        with self._write() as tx:
            if outcome.kind in ("done", "failed"):
                held, after, wake_due, queued = self._settle_ended(
                    tx, task_id, worker_id, outcome, events
                )
                if not held:
                    return SettleResult(False, after)
                woke = self._wake_if_done(tx, after.parent_id) if wake_due else []
                if hand_over and (woke or queued):
                    claimed = claim_next(tx, woke, worker_id, hand_over)
                else:
                    claimed = []
                reports = reports_of(tx, claimed, woke) if woke and claimed else {}
                return SettleResult(True, after, woke, claimed, reports)
            task = self._lock_family(tx, task_id)
            if task.status != Status.IN_PROGRESS or task.worker_id != worker_id:
                return self._superseded(tx, task, events)
            if outcome.kind != "yielded":
                raise ValueError(f"unknown outcome {outcome.kind!r}")
            after, woke = write_yield(tx, task, outcome, events)
            claimed = claim_next(tx, woke, worker_id, hand_over) if hand_over else []
            reports = reports_of(tx, claimed, woke) if woke and claimed else {}
        return SettleResult(True, after, woke, claimed, reports)

    def _settle_ended(
        self, tx: Tx, task_id: str, worker_id: str, outcome: Outcome, events: PendingEvents
    ) -> tuple[bool, Task, bool, bool]:
        """A session's task done or failed: the holder check and the change are one UPDATE
        (only the row still in progress under this worker changes), so a session that lost
        its task changes nothing. Returns whether it was held, the task, whether its parent's
        wake is due (read by the same UPDATE, in the same transaction as the wake), and
        whether a hand-over could find a task in the queue (on PostgreSQL, where a leaf's
        settle hands nothing over, taken as yes)."""
        self._lock_parent(tx, task_id)  # PostgreSQL: parent before child
        status = Status.DONE if outcome.kind == "done" else Status.FAILED
        ended = {
            "p_id": task_id,
            "p_worker": worker_id,
            "p_status": str(status),
            "p_result": outcome.result,
            "p_error": outcome.error,
            "p_files": canonical_json(list(outcome.files)),
            "p_now": tx.now,
        }
        before, ending, rest = split_at_check(events)
        if tx.locking:
            stmt = SETTLE_ENDED_HELD if ending is None else SETTLE_ENDED_HELD_AT_HEAD
        else:
            stmt = SETTLE_ENDED_HELD_QUEUED if ending is None else SETTLE_ENDED_HELD_QUEUED_AT_HEAD
        row = run(tx.conn, stmt, ended).first()
        if row is None:
            task = self._lock_task(tx, task_id)
            if task is None:
                raise TaskNotFound(task_id)
            if ending is not None:
                # The ending call's check, finished on the state that refused it: revoked,
                # it is denied; lost otherwise, it stands as its session checked it.
                state = check_state(task_id, run(tx.conn, STATE_AT_HEAD, {"id": task_id}).first())
                events = [*before, *ending.decide(state), *rest]
            self._superseded(tx, task, events)
            return False, task, False, False
        # What the UPDATE left as it was (id, turn, assignee, run) is all the plan and the
        # entries below read of the task.
        after = task_from_row(row)
        if ending is not None:
            # Held here until this statement, so neither cancelled nor revoked: the state the
            # ending call's check needs, at the head read with it (the last column).
            used = after.usage.get("prompt_tokens", 0) + after.usage.get("completion_tokens", 0)
            held = CheckState(row[-1], Status.IN_PROGRESS, after.revoked, worker_id, used)
            events = [*before, *ending.decide(held), *rest]
        # The ending call's record goes in the ending's own entry (firm/endcall.py), when
        # that entry comes right after it.
        kind = EventKind.COMPLETED if status == Status.DONE else EventKind.FAILED
        call = fold(kind, after.id, after.assignee, events)
        tx.pending.extend(events if call is None else events[:-1])  # the session's record first
        mark = len(tx.pending)
        open_plan(tx, after, outcome)  # this turn's held delegations are cancelled, if any
        if call is not None and len(tx.pending) > mark:
            tx.pending.insert(mark, events[-1])  # entries between: the call keeps its own
            call = None
        said: dict[str, Any] = {} if call is None else {"call": call}
        if status == Status.DONE:
            tx.emit(kind, after, result=outcome.result, files=list(outcome.files), **said)
        else:
            tx.emit(kind, after, error=outcome.error, **said)
        # wake_due, the first column after the task's; then, on SQLite, whether any is queued
        wake_due = bool(row[len(T.c)])
        return True, after, wake_due, tx.locking or bool(row[len(T.c) + 1])

    @staticmethod
    def _superseded(tx: Tx, task: Task, events: PendingEvents) -> SettleResult:
        """Too late to settle (cancelled, or re-run elsewhere), but the calls the session made
        did run: their record stays, marked as from a superseded run."""
        tx.pending.extend(
            (kind, tid, agent, {**data, "superseded": True}) for kind, tid, agent, data in events
        )
        return SettleResult(False, task)

    def _by_keys(self, conn: Connection, keys: list[str]) -> dict[str, Task]:
        if len(keys) == 1:
            rows = run(conn, Q.BY_DEDUPE_KEY, {"key": keys[0]}).all()
        elif conn.dialect.name == "sqlite":
            rows = run(conn, BY_DEDUPE_KEYS_JSON, {"keys_json": json.dumps(keys)}).all()
        else:
            rows = conn.execute(BY_DEDUPE_KEYS, {"keys": list(set(keys))}).all()
        return {row.dedupe_key: task_from_row(row) for row in rows}

    @retrying
    def add_usage(
        self, task_id: str, calls: int, prompt_tokens: int, completion_tokens: int
    ) -> None:
        params = {
            "p_id": task_id,
            "p_calls": calls,
            "p_prompt": prompt_tokens,
            "p_done": completion_tokens,
        }
        with self._write() as tx:
            run(tx.conn, ADD_USAGE, params)


class _Claim(NamedTuple):
    """A delegation's claim for its worker: how many slots it has, the lease, the cap."""

    worker_id: str
    limit: int
    lease_seconds: float
    cap: int | None


def _check_held(parent: Task, worker_id: str | None) -> None:
    if parent.status != Status.IN_PROGRESS:
        raise TaskNotHeld(f"task {parent.id} is {parent.status}; it can no longer delegate")
    if worker_id is not None and parent.worker_id != worker_id:
        raise TaskNotHeld(
            f"task {parent.id} was handed to another worker; this session can no longer delegate"
        )
