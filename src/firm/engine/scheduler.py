"""The engine: claim todo tasks, run their sessions in a bounded pool, settle, wake, cancel.

One scheduler thread claims work up to `max_concurrent` and hands each claimed task to a
session worker thread. A waiting task holds no worker (invariant 6): the limit counts running
sessions only. The scheduler sleeps until nudged — a task became todo, a session ended — with
a slow heartbeat as the safety net (and the way work submitted by another process is seen).

Many engines (workers, on many machines) can share one store. Each renews the leases of the
sessions it runs; any of them periodically recovers tasks whose worker died or lost its lease,
so no task waits for its own worker to come back. Session execution is therefore at-least-once:
a session cut off mid-turn is re-run from the start of its turn elsewhere, and delegation is
idempotent per (parent, turn, assignee, title) so the re-run finds its subtasks instead of
making them again. On PostgreSQL, nudges and cancellations arrive by LISTEN/NOTIFY.

What a new run is made of lives in engine/runs.py, worker ids and telling a dead worker from
a live one in engine/workers.py, one session from its company to its outcome in
engine/sessionrun.py, and a caller's wait for a run's end in engine/waiting.py; this module
only schedules.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from firm import idlethreads
from firm.audit.checkpoint import Checkpointer
from firm.authority.grants import GrantRequest
from firm.brains import Brain
from firm.clock import SYSTEM_CLOCK, Clock
from firm.engine.company import Companies, Company
from firm.engine.delegated import DelegationStarts
from firm.engine.notewatch import NoteWatch
from firm.engine.runs import prepare_run
from firm.engine.sessionrun import Reports, run_session
from firm.engine.slots import SessionThreads, Slots
from firm.engine.submitted import RootStarts
from firm.engine.waiting import Waiting
from firm.engine.workers import make_worker_id, worker_alive, worker_started, worker_stopped
from firm.errors import FirmError
from firm.events import ENDINGS, TO_TODO, EventKind
from firm.lineages import Lineages
from firm.org import OrgChart
from firm.store.base import Event, SettleResult, Store
from firm.store.notify import StoreSignal
from firm.store.retry import StoreUnavailable
from firm.tasks import Priority, Status, Task
from firm.telemetry import start_tracing

log = logging.getLogger("firm.engine")

# A session thread's next task, its cancel signal and its subtasks if its waking settle read them.
Handed = tuple[Task, threading.Event, Reports]


class Engine:
    """Runs the sessions of every open task in a store."""

    def __init__(
        self,
        store: Store,
        *,
        max_concurrent: int = 4,
        worker_id: str | None = None,
        lease_seconds: float = 30.0,
        heartbeat: float = 1.0,
        global_limit: int | None = None,
        brain: Brain | None = None,
        recover_every: float | None = None,
        clock: Clock = SYSTEM_CLOCK,
        reading_at_once: int | None = None,
    ):
        """`reading_at_once`: how many sessions are expected to read the store at once, for
        which its reader connections are opened as the engine starts (default:
        max_concurrent); more are opened when first needed."""
        if max_concurrent < 1:
            raise FirmError("max_concurrent must be at least 1")
        self.store = store
        self.clock = clock  # what authority's times (grants made, calls checked) are read from
        self.max_concurrent = max_concurrent
        self._reading_at_once = max_concurrent if reading_at_once is None else reading_at_once
        self.worker_id = worker_id or make_worker_id()
        self.lease_seconds = lease_seconds
        self.heartbeat = heartbeat
        self.global_limit = global_limit
        # How often this engine looks for other workers' orphaned tasks: often enough that a
        # dead worker's task waits little more than its lease, rarely enough to cost nothing.
        self.recover_every = recover_every or max(heartbeat, lease_seconds / 2)
        self._brain_override = brain
        self._pool = SessionThreads(max_concurrent)
        self._slots = Slots(max_concurrent)  # what runs, and what claims in flight hold
        self._running, self._running_lock = self._slots.running, self._slots.lock
        self._settling: set[str] = set()  # sessions ended here, their outcome being written
        self.companies = Companies(store, brain)
        self._nudge = threading.Event()
        # A commit made a task todo since the scheduler last claimed (set before the slots
        # are counted, so a session freeing one after that count sees it).
        self._todo_news = False
        # On SQLite a settle claims the head of the queue for its freed slot (hand-over): one
        # that found nothing saw the queue empty (or the store's cap reached), so the slot it
        # frees needs no claim round from the scheduler unless a task became todo since.
        self._settle_looks = store.dialect == "sqlite"
        # Callers waiting on a run's end or the engine's idle (run_until, run_until_idle).
        self.waiting = Waiting(store, self.start, self._running, heartbeat)
        self._stop = threading.Event()
        # A reply's delegations claim, in their commit, what this engine starts at once.
        self.delegations = DelegationStarts(
            self, self._slots, self._launch, self._stop, self._nudge, self._settling
        )
        self._thread: idlethreads.Job | None = None  # the scheduler's loop, once started
        # A submitted root is claimed in its run's commit when this engine runs and has room.
        self.roots = RootStarts(self.delegations, self.companies, lambda: self._thread is not None)
        self._recheck = threading.Event()  # a cancel too big to list: check running tasks
        self.notewatch = NoteWatch()  # which sessions need not read their task's notes
        self._unsubscribe = store.subscribe(self._on_events)
        self._tracing = start_tracing(store)  # None unless OTEL_* variables ask for traces
        self._unlisten: Callable[[], None] | None = None
        self.checkpoints = Checkpointer(store)
        self.lineages = Lineages()  # what its sessions' first checks need not read
        self.peak_running = 0
        # What waking costs: claim rounds, those that found nothing, and nudges from other
        # processes' commits (PostgreSQL NOTIFY). `firm worker` prints them when it stops.
        self.claims = 0
        self.empty_claims = 0
        self.signal_wakeups = 0

    # --- public API ----------------------------------------------------------------------

    def submit(
        self,
        org: OrgChart,
        goal: str,
        *,
        to: str | None = None,
        brain: str = "simulation",
        brain_options: dict[str, Any] | None = None,
        workspace: str | Path | None = None,
        priority: str | Priority = "normal",
        language: str | None = None,
        org_yaml: str | None = None,
        grant: GrantRequest | dict[str, Any] | None = None,
        submitter: str = "user",
    ) -> Task:
        """Create the root task of a new run, and return it as created; the engine (this one,
        at once if it runs and has a slot free, or another) will work it.

        `grant` narrows the top agent's authority for this run: a GrantRequest or a dict with
        any of tools (names or globs), limits (ceilings), ttl (seconds), budget_tokens.
        """
        new = prepare_run(
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
            submitter=submitter,
            brain_override=self._brain_override,
            now=self.clock.now(),
            durable=self.store.dialect == "postgresql",
        )
        return self.roots(new)

    def start(self) -> Engine:
        if self._thread is None:
            worker_started(self.worker_id)
            self._unlisten = self.store.listen(self._on_signal, self._free_slots)
            self.store.warm(self._reading_at_once)
            if not self.store.created:
                # A store this process just made holds no session to recover and no call
                # waiting for a person; the heartbeat looks for both from now on.
                self.store.recover(worker_alive)
                self.store.expire_approvals()
            self.checkpoints.catch_up()
            self._pool.warm()
            # The first round is made here: a submit right after start() finds the slots free
            # for its own claim (engine/submitted.py), not held by a round in flight.
            try:
                self._nudge.clear()  # what nudged before this round, it sees
                if self.store.created and not self.roots.queued:
                    # A store this process just made, nothing submitted to it yet: nothing
                    # to claim (a root submitted from now on is claimed in its own commit).
                    free, claimed = self.max_concurrent, 0
                else:
                    free, claimed = self._claim()
                now = bool(claimed and claimed < free and not self._settle_looks)
            except Exception:
                log.exception("scheduler: store error; retrying")
                now = True
            # Kept once started: a Ctrl-C landing in between leaves stop() nothing to join.
            self._thread = idlethreads.run(lambda: self._loop(not now), "firm-scheduler")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop claiming, interrupt running sessions, hand unfinished ones back to todo."""
        self._stop.set()
        self._nudge.set()
        with self._running_lock:
            running = dict(self._running)
            # A session whose outcome is being written (a run's last, whose checkpoint its
            # thread still signs) is the settle's to end: handing it back would be a write
            # that finds nothing to hand back, on the way out of Team.start(). Should that
            # settle fail, recovery re-runs the task, as for any failed settle.
            settling = set(self._settling)
        for ev in running.values():
            ev.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._pool.shutdown()
        with self._running_lock:
            leftover = list(self._running)
        handed = [t for t in dict.fromkeys([*running, *leftover]) if t not in settling]
        self.store.release(self.worker_id, handed, reason="its worker stopped; it will be re-run")
        worker_stopped(self.worker_id)
        self.checkpoints.close()
        self.companies.close()
        self._unsubscribe()
        if self._unlisten is not None:
            self._unlisten()
        if self._tracing is not None:
            self._tracing.close()
            self._tracing = None

    def abandon(self) -> None:
        """Stop the way a killed process does: no more claims, lease renewals or hand-backs,
        and this worker counts as dead. Sessions already running carry on unaware; their
        tasks are left to recovery by another engine. For testing recovery; stop() after."""
        self._stop.set()
        self._nudge.set()
        worker_stopped(self.worker_id)

    def __enter__(self) -> Engine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def cancel(
        self, task_id: str, reason: str = "cancelled by the user", by: str = "user"
    ) -> list[str]:
        """Cancel a task and its open subtree in one statement; running sessions stop. Returns
        the ids cancelled."""
        cancelled = self.store.cancel(task_id, reason, by)
        self._signal(cancelled)
        self.checkpoints.after_cancel(task_id, cancelled)
        return cancelled

    def revoke(
        self, task_id: str, reason: str = "revoked by the user", by: str = "user"
    ) -> list[str]:
        """Revoke a task's authority and its subtree's; open tasks there are cancelled and
        their running sessions stop (any tool call they still make is denied as revoked).
        Returns the ids revoked."""
        revoked = self.store.revoke(task_id, reason, by)
        self._signal(revoked)
        self.checkpoints.after_cancel(task_id, revoked)
        return revoked

    def run_until(self, root_id: str, timeout: float | None = None) -> Task:
        """Work until the task is terminal (or nothing can move any more); return it."""
        return self.waiting.until_ended(root_id, timeout)

    def run_until_idle(self, timeout: float | None = None) -> None:
        """Work until no task in the store can move."""
        self.waiting.until_idle(timeout)

    def stuck(self, root_id: str) -> bool:
        """Nothing of the run runs here, and no task of it is todo or in progress anywhere."""
        return self.waiting.stuck(root_id)

    @property
    def running(self) -> list[str]:
        with self._running_lock:
            return list(self._running)

    def company(self, run_id: str) -> Company:
        return self.companies.get(run_id)

    # --- internals -----------------------------------------------------------------------

    def _on_events(self, events: list[Event]) -> None:
        self.notewatch.saw(events)
        # A task made todo and claimed in the same commit (a hand-over) is no news to the
        # scheduler: nudging it would only cost a claim that finds nothing. Nor is any, while
        # every slot is taken: the session that frees one nudges it then.
        todo = {e.task_id for e in events if e.kind in TO_TODO}
        if todo and todo - {e.task_id for e in events if e.kind == EventKind.STARTED}:
            self._todo_news = True
            if len(self._running) < self.max_concurrent:
                self._nudge.set()
        watched = self.waiting.watched
        ended = [e.task_id for e in events if e.kind in ENDINGS and e.task_id in watched]
        if ended:
            self.waiting.saw_ended(ended)

    def _free_slots(self) -> int:
        """Sessions this engine could still start (how many new tasks a NOTIFY may wake it for)."""
        return 0 if self._stop.is_set() else self._slots.free()

    def _on_signal(self, signal: StoreSignal) -> None:
        """A commit by any process (PostgreSQL NOTIFY): new work to claim, sessions to stop."""
        if signal.todo:
            self.signal_wakeups += 1
            self._nudge.set()
        if signal.cancelled is None:
            self._recheck.set()
            self._nudge.set()
        elif signal.cancelled:
            self._signal(list(signal.cancelled))
        self.waiting.wake()

    def _stop_lost(self) -> None:
        """Signal running sessions whose task is no longer theirs (cancelled, or recovered)."""
        for tid in self.running:
            state = self.store.session_state(tid)
            if state is None or state[0] != Status.IN_PROGRESS:
                self._signal([tid])

    def _signal(self, task_ids: list[str]) -> None:
        with self._running_lock:
            for tid in task_ids:
                ev = self._running.get(tid)
                if ev is not None:
                    ev.set()

    def _loop(self, looked: bool = False) -> None:
        last_renew = last_recover = last_expire = time.monotonic()
        backoff = 0.0
        if looked:  # start() made the first round
            self._nudge.wait(self.heartbeat)
        while not self._stop.is_set():
            self._nudge.clear()
            try:
                if time.monotonic() - last_renew > self.lease_seconds / 3:
                    self._renew()
                    last_renew = time.monotonic()
                if time.monotonic() - last_recover > self.recover_every:
                    self.store.recover(worker_alive)
                    last_recover = time.monotonic()
                if time.monotonic() - last_expire > self.heartbeat:
                    # Waiting calls past their timeout are denied (one query finds them all).
                    self.store.expire_approvals()
                    last_expire = time.monotonic()
                if self._recheck.is_set():
                    self._recheck.clear()
                    self._stop_lost()
                free, claimed = self._claim()
                backoff = 0.0
            except Exception:
                # A store hiccup (a lost connection, a locked file) must not kill the engine.
                log.exception("scheduler: store error; retrying")
                backoff = min(max(backoff * 2, 0.1), 5.0)
                self._stop.wait(backoff)
                continue
            if claimed and claimed < free and not self._settle_looks:
                # There may be more (PostgreSQL skips rows other transactions hold): claim
                # again before sleeping. SQLite's claim takes all there is.
                continue
            self._nudge.wait(self.heartbeat)

    def _claim(self) -> tuple[int, int]:
        """A claim round for the free slots, its tasks started; returns (room, claimed)."""
        with self._slots.hold(self.max_concurrent) as free:
            if free <= 0:
                return 0, 0
            # Cleared only by a claim that has room: a todo task it leaves behind is one a
            # freed slot's settle or claim round must still see.
            self._todo_news = False
            claimed = self.store.claim(self.worker_id, free, self.lease_seconds, self.global_limit)
            self._slots.keep(len(claimed))
            self.claims += 1
            self.empty_claims += not claimed
            for task in claimed:
                self._launch(task)
        return free, len(claimed)

    def _renew(self) -> None:
        """Heartbeat: extend the leases of the sessions running here, and only those (a task
        claimed by a commit whose answer was lost is left to expire and be recovered)."""
        running = self.running
        if not running:
            return
        held = set(self.store.renew_leases(self.worker_id, self.lease_seconds, running))
        with self._running_lock:
            lost = [t for t in running if t not in held and t in self._running]
            lost = [t for t in lost if t not in self._settling]
        if lost:
            log.warning("lost the lease on %s; stopping those sessions", ", ".join(lost))
            self._signal(lost)

    def _launch(self, task: Task) -> None:
        ev = threading.Event()
        with self._running_lock:
            self.peak_running = max(self.peak_running, self._slots.enter(task.id, ev))
        if self._stop.is_set():
            return  # left in _running unstarted, for stop() to hand back with the rest
        try:
            self._pool.submit(lambda: self._work(task, ev))
        except RuntimeError:  # no thread to run it on: claimed, not started, so handed back
            with self._running_lock:
                self._running.pop(task.id, None)
            self._hand_back(task.id, "its worker could not start it; it will be re-run")

    def _work(self, task: Task, cancel: threading.Event) -> None:
        # A settle that wakes a task (a manager whose last report this was) claims it for
        # this worker in the same transaction, and this thread runs it next in the slot the
        # ended session held: no scheduler hop, no second transaction (store/handover.py).
        next_up: Handed | None = (task, cancel, None)
        while next_up is not None:
            next_up = self._work_one(*next_up)

    def _work_one(self, task: Task, cancel: threading.Event, subtasks: Reports) -> Handed | None:
        done: SettleResult | None = None  # the settle, with what it hands this thread next
        looked = False  # the settle looked at the queue's head for the freed slot
        try:
            outcome, pending, done = run_session(self, task, cancel, subtasks, self._stop)
            if outcome is not None and done is None:  # else its delegations wrote its end
                with self._running_lock:
                    self._settling.add(task.id)
                hand_over = None if self._stop.is_set() else self.lease_seconds
                done = self.store.settle(
                    task.id, self.worker_id, outcome, events=pending, hand_over=hand_over
                )
                looked = done.applied and hand_over is not None and self._settle_looks
            if done is not None and done.applied and done.task is not None:
                self.checkpoints.after_ended([done.task])
        except StoreUnavailable as exc:
            # Not the agent's fault: leave the task to its lease; recovery re-runs it.
            log.error("session of %s cannot reach the store (%s); handing it back", task.id, exc)
            self._hand_back(task.id, f"its worker lost the database: {exc}")
        except Exception:
            log.exception("session of %s failed to settle; recovery will re-run it", task.id)
        finally:
            handed = done.claimed if done is not None else []
            nxt = handed[0] if handed else None
            ev = threading.Event()
            with self._running_lock:
                self._running.pop(task.id, None)
                self._settling.discard(task.id)
                if nxt is not None:
                    self._running[nxt.id] = ev
                idle = not self._running
            if nxt is None and not (looked and not self._todo_news):
                self._nudge.set()  # a slot is free, and there may be work for it
            if idle:
                self.waiting.wake()
        for extra in handed[1:]:  # a settle wakes one task; should it ever be more
            self._launch(extra)
        if nxt is not None and self._stop.is_set():
            # Stopping: left in _running unstarted, for stop() to hand back with the rest.
            return None
        return None if nxt is None or done is None else (nxt, ev, done.subtasks.get(nxt.id))

    def _hand_back(self, task_id: str, reason: str) -> None:
        try:
            self.store.release(self.worker_id, [task_id], reason=reason)
        except Exception:  # still unreachable: the lease expires and another worker recovers it
            log.warning("could not hand %s back; its lease will expire", task_id)
