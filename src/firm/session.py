"""A session: one agent working one task. What a brain sees, and the checked path for tools.

Everything a brain can get wrong — an unknown tool, bad arguments, a delegation outside the
org chart, a denied call — comes back as a ToolResult with ok=False and a message it can act
on. Only cancellation interrupts a brain, by raising SessionCancelled at its next step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from firm import checked, ending, streams
from firm.audit import recordable
from firm.authority.check import Denial, Link, Standing
from firm.authority.grants import Grant, remaining_budget
from firm.brains.protocol import SessionCancelled, ToolResult
from firm.callrecord import MAX_TOOL_NAME, CallRecord, refusal
from firm.chain import canonical_json, digest
from firm.clock import SYSTEM_CLOCK, Clock
from firm.endcall import DELEGATE_TOOL, Pending, SubtaskCall
from firm.errors import FirmError, StoreError, TaskNotHeld, ToolError, WorkspaceError
from firm.events import EventKind
from firm.lifecycle import LifecycleCompany, LifecycleTools
from firm.lineages import Chain, Lineages
from firm.org import AgentSpec, ApprovalNeed, OrgChart
from firm.store.approvals import approval_outcome
from firm.store.base import CheckState, Event, Store
from firm.tasks import Outcome, Status, Task
from firm.tools.arguments import canonical_arguments
from firm.tools.invoke import run_coroutine, to_text
from firm.tools.registry import ToolDef, ToolRegistry
from firm.tools.workspace import Workspace


class SessionCompany(LifecycleCompany, Protocol):
    """What a session needs of its company: the chart, the tools, the workspace and the
    authority hooks (AuthorityPolicy's). The engine's Company is one."""

    org: OrgChart
    registry: ToolRegistry
    workspace: Workspace

    def grant_of(self, task: Task) -> Grant: ...
    def offers(self, task: Task, tool: ToolDef) -> bool: ...
    def offered(self, task: Task, registry: ToolRegistry) -> tuple[ToolDef, ...]: ...
    def on_denial(self, task: Task, denial: Denial) -> bool: ...
    def approval_for(self, task: Task, tool: ToolDef) -> ApprovalNeed | None: ...


THOUGHT_LIMIT = 4000


class Session(LifecycleTools):
    """The engine's session: implements firm.brains.protocol.Session for brains and
    ToolContext for the built-in tools (their lifecycle bodies in firm.lifecycle)."""

    company: SessionCompany

    def __init__(
        self,
        *,
        store: Store,
        company: SessionCompany,
        task: Task,
        subtasks: list[Task],
        brief: str | Callable[[], str],
        cancel_event: threading.Event,
        worker_id: str,
        revoke: Callable[[str, str, str], object] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        lineages: Lineages | None = None,
    ):
        self.clock = clock
        self.store = store
        self.company = company
        self.task = task
        self.task_id = task.id
        self.agent_id = task.assignee
        self.subtasks = subtasks
        self._brief = brief
        self.worker_id = worker_id
        self.workspace = company.workspace
        self._cancel = cancel_event
        # How this session revokes (on_denial: revoke): the engine's path signals running
        # sessions and signs a checkpoint; the store's alone is the fallback.
        self._revoke = revoke or (lambda task_id, reason, by: store.revoke(task_id, reason, by))
        self.outcome: Outcome | None = None
        self.delegated: list[str] = []
        self.files_written: list[str] = []
        self.last_text: str | None = None
        self.cancel_reason: str | None = None
        self._deferred = []  # firm.lifecycle: entries riding a later write
        self._offered: tuple[ToolDef, ...] | None = None
        self._names: frozenset[str] | None = None  # of the tools offered
        self.awaiting: list[str] = []  # approvals this session asked for
        self._batch = None  # firm.lifecycle: delegations written together
        # The ancestors' ids and grant expiries, known once (a grant never changes); checks
        # read only this task's row (Reads.state_at_head). The engine's lineages know them
        # for a task it delegated, and learn this one's for its subtasks.
        self.lineages = lineages
        self._ancestors: Chain | None = None
        self._grant: Grant | None = None
        self._standing_links: tuple[Link, ...] | None = None  # the lineage with none revoked
        self._seen: CheckState | None = None  # the last check's state, while the task stood

    # --- what the brain reads ------------------------------------------------------------

    @property
    def brief(self) -> str:
        # A function until first read: a brain that never reads it pays for no text.
        if not isinstance(self._brief, str):
            self._brief = self._brief()
        return self._brief

    @brief.setter
    def brief(self, brief: str | Callable[[], str]) -> None:
        self._brief = brief

    @property
    def org(self) -> OrgChart:
        return self.company.org

    @property
    def agent(self) -> AgentSpec:
        return self.org.agent(self.task.assignee)

    @property
    def reports(self) -> list[AgentSpec]:
        return self.org.reports(self.task.assignee)

    @property
    def manager(self) -> AgentSpec | None:
        return self.org.manager(self.task.assignee)

    @property
    def ended(self) -> bool:
        return self.outcome is not None

    def tools(self) -> list[ToolDef]:
        """The tools offered: lifecycle tools, then what its authority allows (a grant does
        not change during a session; revocation and expiry are checked per call)."""
        if self._offered is None:
            self._offered = self.company.offered(self.task, self.company.registry)
        return list(self._offered)

    def _offered_names(self) -> frozenset[str]:
        if self._names is None:
            self._names = frozenset(t.name for t in self.tools())
        return self._names

    def find_tool(self, name: str) -> ToolDef | None:
        return self.company.registry.find(name)

    def subtree(self, task_id: str | None = None) -> list[Task]:
        tree = self.store.subtree(task_id or self.task.id)
        if tree and tree[0].root_id != self.task.root_id:
            raise ToolError(f"{task_id} is not a task of this run")
        return tree

    def events_of(self, task_ids: Iterable[str], kinds: Iterable[str] | None = None) -> list[Event]:
        ids = list(task_ids)
        if not ids:
            return []
        events = self.store.events_after(0, 1_000_000, task_ids=ids, kinds=kinds)
        if set(ids) <= {self.task.id, self.task.root_id}:
            return events  # of this run's own tasks: nothing to check them against
        run = {t.id for t in self.store.subtree(self.task.root_id)}
        return [e for e in events if e.task_id in run]

    def log(self, kind: str, data: Mapping[str, Any]) -> None:
        self._write_with_owed([(kind, self.task.id, self.agent_id, recordable.data(data))])

    def give_up(self, reason: str) -> None:
        if self.outcome is not None:
            return
        result = self.call("fail_task", {"reason": recordable.text(reason) or "no reason given"})
        if self.outcome is None:  # denied: only a revoked task is, and it is cancelled too
            self._cancel.set()
            raise SessionCancelled(f"could not fail {self.task.id}: {result}")

    # --- cancellation --------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        if self._cancel.is_set():
            return True
        # The store is the truth: a task cancelled by another process stops here too, and so
        # does a session whose task was handed to another worker after its lease ran out.
        state = self.store.session_state(self.task.id)
        if state is None or state[0] != Status.IN_PROGRESS:
            return True
        if state[2] != self.worker_id:
            self.cancel_reason = f"task {self.task.id} was handed to another worker"
            return True
        return False

    def check_cancelled(self) -> None:
        # Brains call this between steps, before each model call: the moment a finished
        # call's result, still owed to the log, must reach it (flush_owed).
        self.flush_owed()
        if self.cancelled:
            self._cancel.set()
            raise SessionCancelled(self.cancel_reason or f"task {self.task.id} was cancelled")

    def cancel_signalled(self) -> bool:
        """The in-process cancel signal only (no store read): cheap enough for a tight loop."""
        return self._cancel.is_set()

    def sleep(self, seconds: float) -> None:
        """Wait, waking at once if the task is cancelled."""
        if seconds > 0:
            self.flush_owed()  # a session that waits owes the log nothing meanwhile
        if seconds > 0 and self._cancel.wait(seconds):
            raise SessionCancelled(self.cancel_reason or f"task {self.task.id} was cancelled")

    # --- the activity log ----------------------------------------------------------------

    def think(self, text: str) -> None:
        text = recordable.text(text or "").strip()
        if not text:
            return
        self.last_text = text
        text = recordable.text(text, THOUGHT_LIMIT)
        self._write_with_reply((EventKind.THOUGHT, self.task.id, self.agent_id, {"text": text}))

    def stream(self, text: str) -> None:
        streams.publish(self.store, self.agent_id, self.task_id, text)

    def record_usage(self, calls: int, prompt_tokens: int, completion_tokens: int) -> None:
        self.store.owe_usage(self.task.id, calls, prompt_tokens, completion_tokens)

    # --- authority -----------------------------------------------------------------------

    @property
    def grant(self) -> Grant:
        """The grant this task runs under (what it holds and may hand down)."""
        # A task's grant never changes: asked several times a call, looked up once.
        if self._grant is None:
            self._grant = self.company.grant_of(self.task)
        return self._grant

    def tokens_remaining(self) -> int | None:
        """Model tokens this session may still spend; None means unlimited.

        The grant's budget less this task's own recorded usage (record_usage) and less the
        budgets reserved for the subtasks it delegated. A brain checks it before each model
        call and, when the next call would go past it, stops the session with
        fail_task("budget_exhausted: ..."); a tool call made at or below zero is denied with
        budget_exhausted.
        """
        if self.grant.budget_tokens is None:
            return None  # unlimited: nothing to read
        return self._remaining(self.store.state_at_head(self.task.id), self._reserved())

    def _reserved(self) -> int:
        """The budgets reserved for this task's subtasks (read only when it has a budget):
        only its own delegations change them, so a read before a checked write holds in it."""
        if self.grant.budget_tokens is None:
            return 0
        return sum(
            (c.grant or {}).get("budget_tokens") or 0 for c in self.store.children(self.task.id)
        )

    def _remaining(self, fresh: CheckState, reserved: int) -> int | None:
        used = fresh.tokens_used + self.store.owed_tokens(self.task_id)  # store/usage.py
        left = remaining_budget(self.grant, used, (reserved,))
        return None if left is None else max(0, left)

    def standing(self) -> tuple[Standing, CheckState]:
        """Read, at one moment, what bounds this task: its lineage's expiry and revocation,
        its budget; and the log's head, which places the check in the audit trail.

        The ancestors' ids and grant expiries never change: they are read once, or not at all
        when the engine knows them from the parent's session (firm/lineages.py). Each check
        then reads only what it needs of the task's own row with the head (one seek): a
        cancel or revoke of any ancestor stamps this row too, so the row alone says whether
        the task still stands."""
        fresh, revoked = self.learn_ancestors()
        if fresh is None:
            fresh = self.store.state_at_head(self.task.id)
        at = round(self.clock.now(), 6)
        return self.standing_of(fresh, self._reserved(), at, revoked), fresh

    def learn_ancestors(self) -> tuple[CheckState | None, list[bool] | None]:
        """Know the ancestors before a check; when that took reading the lineage, what it
        read: the task's state and the revocation of each task on the path."""
        if self._ancestors is None and self.lineages is not None:
            self._ancestors = self.lineages.ancestors(self.task)
        if self._ancestors is not None:
            return None, None
        head, lineage = self.store.lineage(self.task.id)
        self._ancestors = tuple((t.id, self.company.grant_of(t).expires_at) for t in lineage[1:])
        return CheckState.of(lineage[0], head), [t.revoked for t in lineage]

    def standing_of(
        self, fresh: CheckState, reserved: int, at: float, revoked: list[bool] | None = None
    ) -> Standing:
        """The standing a state gives, once the ancestors are known: no store read, so a
        checked write may build it inside its transaction (firm/checked.py). `revoked`, each
        task's on the path when the lineage was just read, names which was revoked."""
        if revoked is not None and any(revoked):
            links = self._links(revoked)
        elif fresh.revoked:
            links = self._links([True] + [False] * len(self._ancestors or ()))
        else:
            # The usual answer, the same at every check of the session: built once.
            if self._standing_links is None:
                self._standing_links = self._links([False] * (len(self._ancestors or ()) + 1))
            links = self._standing_links
        return Standing(
            task_id=self.task_id,
            agent=self.agent_id,
            grant=self.grant,
            lineage=links,
            tokens_remaining=self._remaining(fresh, reserved),
            checked_seq=fresh.head_seq,
            checked_at=at,
        )

    def _links(self, revoked: list[bool]) -> tuple[Link, ...]:
        """The task, then its ancestors, each with whether it is revoked."""
        assert self._ancestors is not None
        chain = ((self.task_id, self.grant.expires_at), *self._ancestors)
        return tuple(
            Link(aid, expires, gone) for (aid, expires), gone in zip(chain, revoked, strict=True)
        )

    def chain(self) -> Chain | None:
        """This task's chain (itself, then its ancestors) once a check has learnt it."""
        if self._ancestors is None:
            return None
        return ((self.task.id, self.grant.expires_at), *self._ancestors)

    # --- tools ---------------------------------------------------------------------------

    def call(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> ToolResult:
        """Run a tool by dotted name or model name, through the one checked path.

        In order: a session that has ended runs nothing more; the arguments are made canonical
        (or refused); the call's log entry is prepared, so it is known to be recordable; the
        authority check; only then the body; and the entry is written with its result (a
        call that needs no person: its check and record in one write, firm/checked.py)."""
        name = name if isinstance(name, str) else repr(name)
        tool = self.company.registry.find(name) if len(name) <= MAX_TOOL_NAME else None
        if self.outcome is not None:
            return ending.refused_after_end(self, tool.name if tool is not None else name)
        if self._batch and (tool is None or not tool.lifecycle):
            # The reply's delegations go first: their subtasks' budgets are reserved before
            # this call's check reads what is left. Other entries still owed ride this
            # call's own write (its start, or its refusal).
            self._flush_delegations()
        done = checked.attempt(self, tool, arguments) or ending.attempt(self, tool, arguments)
        if done is not None:
            return done
        standing, fresh = self._standing_for(tool)
        if standing.lineage is self._standing_links or not any(
            link.revoked for link in standing.lineage
        ):
            # A revoked task is also cancelled; its calls are denied (and logged) as revoked
            # rather than cut short, so the model and the log both say why.
            self._stop_if_cancelled(fresh)
        if tool is None or (tool.lifecycle and tool.name not in self._offered_names()):
            names = ", ".join(sorted(t.model_name for t in self.tools()))
            shown = recordable.text(name)[:MAX_TOOL_NAME]
            return self._refuse(name, f"there is no tool {shown!r} (available: {names})")
        try:
            canonical = canonical_arguments(tool.model_name, arguments)
            args, given = tool.parse(canonical)
            record = CallRecord.prepare(tool, args, given, standing)
        except ToolError as exc:
            return self._refuse(tool.name, str(exc))
        denial = self.company.check(standing, tool, args, given)
        if denial is not None:
            self._write_events([checked.denied(self, record, denial)])
            checked.after_denial(self, tool, denial)
            return ToolResult(False, f"error: {denial}", denial)
        if tool.lifecycle:
            content, ok = self.run_body(tool, args)
            self._log_call(tool, record, content, ok, None)
            return ToolResult(ok, content)
        need = self.company.approval_for(self.task, tool)
        if need is None:  # a hook that answered otherwise above: checked again, in its write
            return checked.call(self, tool, args, given, record)
        return self._ask_approval(tool, canonical, record, need)

    def run_body(self, tool: ToolDef, args: dict[str, Any]) -> tuple[str, bool]:
        """The body, after its check; what the model is given back is what the log's digest
        covers."""
        try:
            kwargs = dict(args)
            if tool.context_param:
                kwargs[tool.context_param] = self
            value = tool.fn(**kwargs)
            if tool.is_async:
                value = run_coroutine(value)
            content = value if isinstance(value, str) else to_text(value)
            ok = True
        except SessionCancelled:
            raise
        except (ToolError, WorkspaceError, StoreError) as exc:
            content, ok = f"error: {exc}", False
        except FirmError as exc:
            content, ok = f"error: {exc}", False
        except Exception as exc:  # a user tool's bug must not take the session down
            content, ok = f"error: {tool.name} raised {type(exc).__name__}: {exc}", False
        return recordable.text(content), ok

    # --- calls that wait for a person ----------------------------------------------------

    def _ask_approval(
        self, tool: ToolDef, canonical: dict[str, Any], record: CallRecord, need: ApprovalNeed
    ) -> ToolResult:
        """A granted call the chart puts before a person: recorded with its exact arguments,
        its body not run; the session's turn ends and the task waits holding no worker."""
        try:
            approval = self.store.request_approval(
                self.task_id,
                self.worker_id,
                tool=tool.name,
                args_json=canonical_json(canonical),
                args_digest=record.data["args_digest"],
                summary=record.data["summary"],
                rule=need.rule,
                timeout=need.timeout,
                checked_seq=record.data["checked_seq"],
                events=self.take_deferred(),
            )
        except TaskNotHeld as exc:
            raise self.lost_task(exc) from None
        if approval.status != "pending":
            # The same call, asked again in the same turn (a re-run after an interruption):
            # it was decided already, and an approved one has run once, before this session.
            return ToolResult(approval.ok is True, approval_outcome(approval))
        if approval.id not in self.awaiting:
            self.awaiting.append(approval.id)
        self.outcome = Outcome.yielded()
        return ToolResult(
            True,
            f"{tool.model_name} needs a person's approval (approval {approval.id}); it has not "
            "run. Your turn ends now: you will be woken with the decision — the call's result "
            "if it is approved (run with exactly these arguments), or the reason if it is "
            "denied.",
        )

    def _stop_if_cancelled(self, fresh: CheckState) -> None:
        if fresh.status == Status.IN_PROGRESS and fresh.worker_id != self.worker_id:
            self.cancel_reason = f"task {self.task.id} was handed to another worker"
        if (
            self._cancel.is_set()
            or fresh.status != Status.IN_PROGRESS
            or fresh.worker_id != self.worker_id
        ):
            self._cancel.set()
            raise SessionCancelled(self.cancel_reason or f"task {self.task.id} was cancelled")

    def _refuse(self, name: str, message: str) -> ToolResult:
        entry = (EventKind.TOOL_ERROR, self.task.id, self.agent_id, refusal(name, message))
        self._write_events([entry])
        return ToolResult(False, f"error: {recordable.text(message)}")

    def _log_call(
        self, tool: ToolDef, record: CallRecord, content: str, ok: bool, started: int | None
    ) -> None:
        data = {
            **record.data,
            "allowed": True,
            "ok": ok,
            "result_digest": digest(content),
        }
        if started is not None:
            data["started_seq"] = started
        if not ok:
            data["error"] = content[:500]
        entry: Pending = (EventKind.TOOL_CALL, self.task.id, self.agent_id, data)
        subtask, self._named_subtask = self._named_subtask, None
        if ok and subtask is not None and tool.name == DELEGATE_TOOL:
            entry = SubtaskCall(entry, subtask)  # may ride in its subtask's `delegated`
        if tool.lifecycle and not ok:
            self._write_events([entry])
        else:
            # Owed: written with the session's next write — the next call's start, a
            # delegation, a thought, the settle — or before its next model call or wait
            # (flush_owed). A crash before then leaves the start unanswered, as a crash
            # during the body does: the next session answers it as interrupted.
            self._deferred.append(entry)
