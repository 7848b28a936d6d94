"""A submitted run's root starts at once, in a free slot of the engine it was submitted to.

Left to the scheduler, a new root waited for a nudge, the scheduler's thread to wake and a
claim transaction of its own after the run's: ~1 ms of a submit's path to its first session
(benchmarks/makespan_trace.py, "ceo start"). Instead, when the engine is running and has a
slot free, the run's own commit claims the head of the queue for this worker
(`Store.create_run_and_claim`) — the new root, unless waiting work of a higher priority
outranks it (that is claimed instead, and the root waits its turn) — with the slot held
before the write, as a delegation's claim holds its slots (engine/delegated.py), so no other
claim in flight counts it too; the claimed task enters the running sessions before the slot
is let go. An engine not started yet (Firm.submit before run_until, `firm run`) claims
nothing here: its scheduler's first round claims the root as before.

On both backends: a root is one task, so there is nothing to spread over other workers
(the reason delegations claim for themselves on SQLite only); and a submitting engine with a
free slot is the one its own nudge would have sent to claim the root first anyway. `firm
worker` processes never submit. A root claimed by a commit whose answer was lost, or by a
worker killed before its session started, is recovered like any claimed task.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from firm.engine.company import Companies
from firm.engine.delegated import DelegationStarts
from firm.engine.runs import NewRun
from firm.tasks import Task, new_task_id


class RootStarts:
    """What Engine.submit stores a new run with: its root, claimed in the run's commit when
    the engine runs and has a slot free."""

    def __init__(self, claims: DelegationStarts, companies: Companies, started: Callable[[], bool]):
        # The engine's claimant, slots, launch, stop and nudge are its delegations' claim's.
        self.claims = claims
        self.companies = companies
        self.engine_started = started
        self.started = 0  # tasks started this way, with no claim round of the scheduler's
        self.queued = 0  # roots stored unclaimed, left to a claim round

    def __call__(self, new: NewRun) -> Task:
        task_id = new_task_id()
        # Known before the write: a root claimed in its commit starts at once, and its
        # session's first step is to look its company up here.
        self.companies.add(task_id, replace(new.company, run=replace(new.run, id=task_id)))
        try:
            return self._store(new, task_id)
        except BaseException:
            self.companies.discard(task_id)
            raise

    def _store(self, new: NewRun, task_id: str) -> Task:
        c = self.claims
        engine, store = c.engine, c.engine.store
        if not self.engine_started() or c.stopping.is_set():
            return self._queued(store.create_run(new.run, new.root, task_id))
        with c.slots.hold(1) as room:
            if not room:
                return self._queued(store.create_run(new.run, new.root, task_id))
            root, claimed = store.create_run_and_claim(
                new.run,
                new.root,
                engine.worker_id,
                engine.lease_seconds,
                engine.global_limit,
                task_id=task_id,
            )
            # It enters the running sessions before the held slot is let go.
            for task in claimed:
                c.launch(task)
            with c.slots.lock:
                self.started += len(claimed)
        if root.id not in {t.id for t in claimed}:
            # Outranked (or the store's cap is reached): the root waits in the queue, and the
            # slot it held may have been refused to a claim round meanwhile.
            self.claims.nudge.set()
        # As it was created, whether or not it runs already: what submit always returned.
        return root

    def _queued(self, root: Task) -> Task:
        self.queued += 1
        self.claims.nudge.set()
        return root
