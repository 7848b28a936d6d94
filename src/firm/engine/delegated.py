"""A reply's delegations start their subtasks at once, in this engine's free slots.

Left to the scheduler, a delegated task waited for a nudge, the scheduler's thread to wake and
a claim transaction of its own, queued behind the running sessions' writes: 1–8 ms on the
makespan's critical path (benchmarks/makespan.py, CEO → 5 → 25). Instead the delegation's own
commit claims them for this worker (`Store.delegate_and_claim`): as many as the engine has
slots free, held before the write so no other claim in flight counts them too, within the
store's cap and in the queue's order, so waiting work of a higher priority is claimed first;
the session thread that delegated starts them on free session threads before it lets the
slots go. Their `started` entries are the ones a claim writes, in the delegation's commit.
A claimed task whose start fails is handed back (Engine._launch); one whose worker dies first
is recovered like any claimed task (its worker is gone, or its lease runs out).

SQLite only, like the hand-over of a freed slot (store/handover.py): worker processes share
PostgreSQL's queue, and a worker taking its own delegations keeps its reports from spreading
over the others (each claim round there goes to whoever the commit's NOTIFY woke). Tried there
(benchmarks/scale_out.py, workers of 16 slots, five alternated pairs at load 2–9), it made no
difference that stood out of the noise — 4 workers, the 1,111-task company: 60–88 tasks/s
without, 47–89 with — and claim rounds a task stayed at 0.20–0.26: a busy queue leaves a
delegating worker few free slots. The store's delegate_and_claim is right on both backends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from firm.engine.slots import Slots
from firm.store.base import DelegateResult, NewTask, PendingEvents, SettleResult, Store
from firm.tasks import Task


class Claimant(Protocol):
    """Whom the claim is for: the engine's worker, its lease and its view of the store's cap."""

    store: Store
    worker_id: str
    lease_seconds: float
    global_limit: int | None


class DelegationStarts:
    """What a session writes its delegations with (LifecycleTools.write_delegations): the
    store's delegate_many, with the claim for this engine's free slots in the same commit."""

    def __init__(
        self,
        engine: Claimant,
        slots: Slots,
        launch: Callable[[Task], None],
        stopping: threading.Event,
        nudge: threading.Event,
        settling: set[str],
    ):
        self.engine = engine
        self.slots = slots
        self.launch = launch
        self.stopping = stopping
        self.nudge = nudge  # the scheduler's
        self.settling = settling  # the engine's sessions whose end is being written
        self.started = 0  # tasks started this way, with no claim round of the scheduler's

    def __call__(
        self,
        parent_id: str,
        turn: int,
        items: Sequence[tuple[PendingEvents, NewTask]],
        worker_id: str | None = None,
        events: PendingEvents = (),
    ) -> list[DelegateResult]:
        engine, store = self.engine, self.engine.store
        if store.dialect != "sqlite" or worker_id != engine.worker_id or self.stopping.is_set():
            return store.delegate_many(parent_id, turn, items, worker_id, events)
        with self.slots.hold(len(items)) as room:
            if not room:
                return store.delegate_many(parent_id, turn, items, worker_id, events)
            results, claimed = store.delegate_and_claim(
                parent_id,
                turn,
                items,
                worker_id,
                room,
                engine.lease_seconds,
                engine.global_limit,
                events,
            )
            # Each enters the running sessions before the held slots are let go.
            for task in claimed:
                self.launch(task)
            with self.slots.lock:  # several session threads may be delegating at once
                self.started += len(claimed)
        if len(claimed) < room:
            # Slots it held and did not fill: a claim round refused for want of them while
            # they were held may have left work in the queue.
            self.nudge.set()
        return results

    def ending(
        self,
        parent_id: str,
        turn: int,
        items: Sequence[tuple[PendingEvents, NewTask]],
        worker_id: str,
        events: PendingEvents,
    ) -> tuple[list[DelegateResult], SettleResult | None]:
        """A reply's delegations with the end of its session's turn (firm/turnend.py). The
        slot the session frees counts as free: of what the commit claims, the first is run
        next by the session's own thread, as a settle's hand-over is (in the result's
        `claimed`), and the rest start at once on free threads. While the engine stops, the
        delegations alone (no settle: a stopping engine hands its sessions' tasks back)."""
        engine, store = self.engine, self.engine.store
        if self.stopping.is_set():
            return self(parent_id, turn, items, worker_id), None
        if worker_id != engine.worker_id:
            return store.delegate_and_yield(parent_id, turn, items, worker_id, events)
        with self.slots.lock:
            self.settling.add(parent_id)  # no lease to renew from the commit on
        lease = engine.lease_seconds
        if store.dialect != "sqlite":
            # Only the task woken at once is claimed: the new work is the workers' to share.
            return store.delegate_and_yield(parent_id, turn, items, worker_id, events, lease)
        with self.slots.hold(len(items) - 1) as room:
            results, settled = store.delegate_and_yield(
                parent_id, turn, items, worker_id, events, lease, room + 1, engine.global_limit
            )
            for task in settled.claimed[1:]:
                self.launch(task)
            with self.slots.lock:
                self.started += len(settled.claimed)
        if len(settled.claimed) < room + 1:
            self.nudge.set()  # as above; and the freed slot found nothing to run next
        return results, replace(settled, claimed=settled.claimed[:1])
