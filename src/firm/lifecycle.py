"""The lifecycle half of a session: the tools that delegate and end a turn, and the log
entries they defer.

delegate, complete, fail and ask_human change the task's state, not the world; their effects
are written by one later store transaction (the delegation, the question, the settle), and the
log entries owed by the session ride in that transaction. The checked path that calls them is
firm.session; this module holds what they do and how the session's ending is decided.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from firm.audit import recordable
from firm.authority.check import Denial, Standing
from firm.authority.grants import GrantError
from firm.brains.protocol import SessionCancelled
from firm.clock import Clock
from firm.errors import TaskNotHeld, ToolError
from firm.lineages import Chain, Lineages
from firm.org import AgentSpec, ApprovalNeed, OrgChart
from firm.store.base import CheckState, Event, NewTask, SettleResult, Store
from firm.store.plans import plan_id, plan_of_turn
from firm.store.questions import question_outcome
from firm.tasks import Outcome, Priority, Status, Task, delegation_key, subtask_id
from firm.tools.builtin import COMPLETE
from firm.tools.registry import ToolContext, ToolDef
from firm.turnend import DelegationWriter, TurnBatch, ended_with_delegations

PendingEntries = list[tuple[str, str | None, str | None, dict[str, Any]]]


class LifecycleCompany(Protocol):
    """What the lifecycle tools need of the company: how a subtask's grant is narrowed, whether
    a turn's delegations wait for a person, and the check an ending by message passes."""

    def derive_grant(
        self,
        parent: Task,
        assignee: str,
        *,
        tools: list[str] | None,
        limits: dict[str, float] | None,
        ttl: float | None,
        now: float,
        remaining_budget: int | None,
    ) -> dict[str, Any]: ...
    def plan_for(self, task: Task) -> ApprovalNeed | None: ...
    def check(
        self,
        standing: Standing,
        tool: ToolDef,
        args: Mapping[str, Any],
        given: frozenset[str] | None = None,
    ) -> Denial | None: ...


class LifecycleTools(ToolContext):
    """ToolContext's lifecycle bodies and the session's deferred entries; mixed into
    firm.session.Session, which sets the state below."""

    store: Store
    company: LifecycleCompany
    clock: Clock
    task: Task
    subtasks: list[Task]
    worker_id: str
    outcome: Outcome | None
    delegated: list[str]
    files_written: list[str]
    last_text: str | None
    cancel_reason: str | None
    awaiting: list[str]
    lineages: Lineages | None
    # What writes the delegations, when not the store's delegate_many: an engine's, which
    # also starts the new subtasks in its free slots (engine/delegated.py).
    write_delegations: DelegationWriter | None = None
    # The turn's end, when the reply's delegations wrote it (firm/turnend.py): the engine
    # settles the session no more.
    settled: SettleResult | None = None
    _cancel: threading.Event
    # Log entries of lifecycle calls (delegate, complete, fail). Their effect is written by
    # a later store transaction — the delegation or the settle — so their entries ride in
    # that transaction rather than costing one of their own; a crash before it loses the
    # entry together with the effect it records.
    _deferred: PendingEntries
    # Delegations waiting to be written together (batch_delegations), each with the
    # entries deferred before it.
    _batch: list[tuple[PendingEntries, NewTask]] | None
    # The batch the standing was read for, and that reading (_standing_for).
    _batch_read: tuple[list[tuple[PendingEntries, NewTask]], Standing, CheckState] | None = None
    # Activity entries made now ride the session's next write (owing()).
    _owing = False
    # The subtask the last delegate_task body named: its call's entry says so, so the
    # delegation's write can log the call in the subtask's `delegated` (firm/endcall.py).
    _named_subtask: str | None = None

    if TYPE_CHECKING:  # the checked path's, in firm.session

        @property
        def org(self) -> OrgChart: ...
        @property
        def reports(self) -> list[AgentSpec]: ...
        def tokens_remaining(self) -> int | None: ...
        def standing(self) -> tuple[Standing, CheckState]: ...
        def chain(self) -> Chain | None: ...

    def _standing_for(self, tool: ToolDef | None) -> tuple[Standing, CheckState]:
        """What a call is checked against. The delegate_task calls of one reply (a batch)
        share one reading, taken at the first of them: their subtasks are written by one
        write that refuses them all when the task was lost, cancelled or revoked since, so a
        reading per call would decide nothing that write does not; and nothing of this
        session is written between them (its budget, its usage). The reply is checked at one
        place in the log, as it was decided at once."""
        batch = self._batch
        if batch is None or tool is None or tool.name != "delegate_task":
            return self.standing()
        read = self._batch_read
        if read is not None and read[0] is batch:  # a flush starts a new batch list
            standing, fresh = read[1], read[2]
        else:
            standing, fresh = self.standing()
            self._batch_read = (batch, standing, fresh)
        reserved = self._batch_reserved()
        if reserved and standing.tokens_remaining is not None:
            # What the reply's earlier delegations reserved is not in the store yet: a call
            # is checked against what is left after them, as it would be one at a time.
            left = max(0, standing.tokens_remaining - reserved)
            standing = dataclasses.replace(standing, tokens_remaining=left)
        return standing, fresh

    def _budget_left(self) -> int | None:
        """What a new subtask's budget is carved from: the task's remaining tokens, less what
        the reply's earlier delegations, not written yet, reserved."""
        remaining = self.tokens_remaining()
        if remaining is None:
            return None
        return max(0, remaining - self._batch_reserved())

    def _batch_reserved(self) -> int:
        """The token budgets the reply's delegations waiting to be written reserve."""
        return sum((new.grant or {}).get("budget_tokens") or 0 for _, new in self._batch or ())

    def lost_task(self, exc: TaskNotHeld) -> SessionCancelled:
        """A write refused because this worker no longer holds the task: the session stops."""
        self._cancel.set()
        self.cancel_reason = str(exc)
        return SessionCancelled(str(exc))

    # --- delegation ----------------------------------------------------------------------

    def delegate(
        self,
        assignee: str,
        title: str,
        description: str,
        *,
        priority: str | None = None,
        language: str | None = None,
        tools: list[str] | None = None,
        limits: dict[str, float] | None = None,
        ttl: float | None = None,
    ) -> str:
        if self.outcome is not None:
            raise ToolError(f"this task has already ended ({self.outcome.kind})")
        me = self.agent_id
        reports = [a.id for a in self.reports]
        if not reports:
            raise ToolError("you have no reports to delegate to; do the work yourself")
        if assignee == me:
            raise ToolError(
                f"you cannot delegate to yourself; your reports are: {', '.join(reports)}"
            )
        if not self.org.has_agent(assignee):
            raise ToolError(
                f"there is no agent {assignee!r}; your reports are: {', '.join(reports)}"
            )
        if assignee not in reports:
            raise ToolError(
                f"{assignee} does not report to you; you can delegate only to your "
                f"direct reports: {', '.join(reports)}"
            )
        if not title.strip():
            raise ToolError("the title is empty; say in a few words what the subtask is")
        try:
            prio = Priority.parse(priority) if priority else self.task.priority
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        try:
            grant = self.company.derive_grant(
                self.task,
                assignee,
                tools=tools,
                limits=limits,
                ttl=ttl,
                now=self.clock.now(),
                remaining_budget=self._budget_left(),
            )
        except GrantError as exc:
            raise ToolError(f"cannot narrow the subtask's authority: {exc}") from None
        new = NewTask(
            title=title.strip()[:500],
            description=description.strip(),
            assignee=assignee,
            created_by=me,
            priority=prio,
            language=(language or self.task.language).strip() or self.task.language,
            grant=grant,
            plan=self._plan_id(),
        )
        chain = self.chain()
        if self.lineages is not None and chain is not None:
            # Before the write: its subtasks' first checks need not read their ancestors.
            self.lineages.remember(self.task.id, chain)
        if self._batch is not None:
            # Written with the reply's other delegations when the batch closes; the id follows
            # from the delegation key, so it is the one the write will create (or find).
            key = delegation_key(self.task.id, self.task.turn, new.assignee, new.title)
            self._batch.append((self._deferred, new))
            self._deferred = []
            task_id = subtask_id(key)
        else:
            task_id = self._delegate_now([(self._deferred, new)])[0]
            self._deferred = []
        if task_id not in self.delegated:
            self.delegated.append(task_id)
        self._named_subtask = task_id
        return task_id

    def _plan_id(self) -> str | None:
        """The plan this turn's delegations wait for, when the chart puts them before a
        person (store/plans.py); None when they start at once."""
        if self.company.plan_for(self.task) is None:
            return None
        return plan_id(self.task.id, self.task.turn)

    def _delegate_now(
        self, items: list[tuple[PendingEntries, NewTask]], owed: PendingEntries | None = None
    ) -> list[str]:
        write = self.write_delegations or self.store.delegate_many
        try:
            results = write(
                self.task.id, self.task.turn, items, worker_id=self.worker_id, events=owed or []
            )
        except TaskNotHeld as exc:
            raise self.lost_task(exc) from None
        return [r.task.id for r in results]

    @contextmanager
    def batch_delegations(self) -> Iterator[TurnBatch]:
        """Delegations made inside are written together, in one transaction, when the block
        ends (or before any other write of this session): the delegate_task calls of one
        model reply start their subtasks at once; with the turn's end, when the brain says
        the reply ends it (firm/turnend.py). A block left by an exception writes no
        subtasks; the tool calls' own entries stay deferred, to ride the settle."""
        if self._batch is not None:
            yield TurnBatch()  # the outer block's end writes them
            return
        self._batch, turn = [], TurnBatch()
        try:
            yield turn
        except BaseException:
            batch, self._batch = self._batch, None
            self._deferred = [e for events, _ in batch for e in events] + self._deferred
            raise
        if not (turn.ends and ended_with_delegations(self)):
            self._flush_delegations(owed=True)
        self._batch = None

    def _flush_delegations(self, owed: bool = False) -> None:
        """Write the batch's delegations; with `owed`, the entries the session owes since
        (the delegate_task calls' records) ride their transaction, after them, instead of
        a commit of their own on the way to the session's next model call."""
        batch = self._batch
        if not batch:
            return
        self._batch = []
        after: PendingEntries = []
        if owed and self.outcome is None:
            after, self._deferred = self._deferred, []
        try:
            self._delegate_now(batch, after)
        except SessionCancelled:
            # Nothing was written: the entries that rode with the batch wait for the settle.
            self._deferred = [e for events, _ in batch for e in events] + after + self._deferred
            raise
        except BaseException:
            self._deferred = after + self._deferred  # still owed, as they were
            raise

    # --- ending the turn -----------------------------------------------------------------

    def complete(self, result: str, files: list[str] | None) -> str:
        if self.outcome is not None:
            raise ToolError(f"this task has already ended ({self.outcome.kind})")
        chosen = list(dict.fromkeys(files if files is not None else self.files_written))
        # Files this session wrote, and files its reports delivered (checked when they
        # completed), are known to be there; others are looked for.
        known = set(self.files_written)
        known.update(f for t in self.subtasks if t.status == Status.DONE for f in t.files)
        missing = [f for f in chosen if f not in known and not self.workspace.exists(f)]
        if missing:
            raise ToolError(
                f"these files are not in the workspace: {', '.join(missing)}; "
                "write them with files.write first, or leave them out"
            )
        normalised = [self.workspace.relative(f) for f in chosen]
        self.outcome = Outcome.done(recordable.text(result), normalised)
        return "task completed"

    def fail(self, reason: str) -> str:
        if self.outcome is not None:
            raise ToolError(f"this task has already ended ({self.outcome.kind})")
        self.outcome = Outcome.failed(recordable.text(reason).strip() or "no reason given")
        return "task marked as failed"

    def ask_human(self, question: str) -> str:
        """ask_human's body: the question is recorded (with the entries waiting for a write)
        and the turn ends; the task waits, holding no worker, until a person answers."""
        if self.outcome is not None:
            raise ToolError(f"this task has already ended ({self.outcome.kind})")
        try:
            asked = self.store.ask_question(
                self.task_id, self.worker_id, question, events=self.take_deferred()
            )
        except TaskNotHeld as exc:
            raise self.lost_task(exc) from None
        if asked.status != "pending":
            # Asked again in the same turn (a re-run after an interruption), and answered.
            outcome = question_outcome(asked)
            if outcome.startswith("error: "):
                raise ToolError(outcome.removeprefix("error: "))
            return outcome
        if asked.id not in self.awaiting:
            self.awaiting.append(asked.id)
        self.outcome = Outcome.yielded()
        return (
            f"your question was sent to a person (question {asked.id}). Your turn ends now: "
            "you will be woken with the answer."
        )

    def wrote_file(self, path: str) -> None:
        if path not in self.files_written:
            self.files_written.append(path)

    # --- entries deferred to ride a later write ------------------------------------------

    def take_deferred(self) -> list[tuple[str, str | None, str | None, dict[str, Any]]]:
        """Hand over the entries waiting for a write (the engine settles with them)."""
        self._flush_delegations()
        deferred, self._deferred = self._deferred, []
        return deferred

    def _owes(self) -> bool:
        """Entries that may be written ahead of the session's next store write: not while a
        batch of delegations waits (they come after it), nor once the session has ended
        (the ending's entry rides the settle, with its effect)."""
        return bool(self._deferred) and not self._batch and self.outcome is None

    def flush_owed(self) -> None:
        """Write the finished calls' entries and the model calls' usage still owed, so
        people watching see them before the session goes quiet (a model call, a wait)."""
        if self._owes():
            self._write_events([])  # the usage rides it (store/usage.py)
        else:
            self.store.pay_usage()

    @contextmanager
    def owing(self) -> Iterator[None]:
        """Thoughts and activity entries made inside ride the session's next write (a tool
        call's, a delegation's, the settle) instead of costing a transaction each; they are
        written at the latest before its next model call or wait (flush_owed). What a model
        reply leaves to log — its text, the call's record, a manager's verdict — is followed
        at once by a write of the session's own, on the way to the next model call."""
        self._owing = True
        try:
            yield
        finally:
            self._owing = False

    def _write_with_owed(self, entries: PendingEntries) -> None:
        """A thought or activity entry: after the entries owed, when they may be written."""
        if self._owing and self.outcome is None:
            self._deferred.extend(entries)
        elif self._owes():
            self._write_events(entries)
        else:
            self.store.append_events(entries)

    def _write_with_reply(self, entry: tuple[str, str | None, str | None, dict[str, Any]]) -> None:
        """A thought: said in a reply whose delegations are written together (a batch is
        open), it rides their transaction, ahead of them, instead of costing one of its own;
        said elsewhere, it is written as any activity entry."""
        if self._batch is not None:
            self._deferred.append(entry)
        else:
            self._write_with_owed([entry])

    def _write_events(self, entries: PendingEntries) -> list[Event]:
        taken = self.take_deferred()
        pending = taken + entries
        if not pending:
            return []
        try:
            return self.store.append_events(pending)
        except BaseException:
            # Nothing was written: what was owed is still owed (the settle may carry it).
            self._deferred = taken + self._deferred
            raise

    # --- how the session ended -----------------------------------------------------------

    def final_outcome(self, final_text: str | None) -> Outcome:
        outcome = self._final_outcome(final_text)
        need = self.company.plan_for(self.task)
        # The turn's delegations wait for a person: the settle writes them as one plan.
        return outcome if need is None else plan_of_turn(outcome, need.rule, need.timeout)

    def _final_outcome(self, final_text: str | None) -> Outcome:
        if self.outcome is not None:
            return self.outcome
        if self.delegated:
            return Outcome.yielded()
        text = recordable.text(final_text or self.last_text or "").strip()
        if text:
            # Ending with a message is completing the task: it needs the authority that
            # complete_task would (not expired, not revoked).
            standing, _ = self.standing()
            denial = self.company.check(standing, COMPLETE, {"result": text}, frozenset())
            if denial is not None:
                return Outcome.failed(f"{denial.code}: {denial.reason}")
            return Outcome.done(text, self.files_written)
        return Outcome.failed(f"{self.agent_id} ended its session without a result")
