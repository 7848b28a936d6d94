"""The store protocol: everything the engine, CLI and server ask of persistence.

The engine talks to this protocol only; SQL lives behind it (store/sql.py and its parts), so
a backend is a matter of a connection URL, not of engine code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from firm.tasks import Outcome, Priority, Status, Task


@dataclass(frozen=True)
class Event:
    seq: int
    ts: float
    kind: str
    task_id: str | None
    agent: str | None
    data: dict[str, Any]
    prev_hash: str = ""
    hash: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "ts": self.ts,
            "kind": self.kind,
            "task_id": self.task_id,
            "agent": self.agent,
            "data": self.data,
        }


@dataclass(frozen=True, slots=True)
class CheckState:
    """What a tool call's check reads of its own task, with the log's head in the same
    snapshot: whether the task still runs here and still stands, and what it has spent."""

    head_seq: int
    status: Status
    revoked: bool
    worker_id: str | None
    tokens_used: int

    @classmethod
    def of(cls, task: Task, head_seq: int) -> CheckState:
        used = task.usage.get("prompt_tokens", 0) + task.usage.get("completion_tokens", 0)
        return cls(head_seq, task.status, task.revoked, task.worker_id, used)


@dataclass(frozen=True)
class RunSpec:
    """What a run needs to be resumed from the database alone."""

    org_yaml: str
    org_source: str
    brain: str
    brain_options: dict[str, Any]
    workspace: str
    id: str = ""
    created_at: float = 0.0


@dataclass(frozen=True)
class NewTask:
    title: str
    description: str
    assignee: str
    created_by: str
    priority: Priority = Priority.NORMAL
    language: str = "en"
    grant: dict[str, Any] | None = None
    plan: str | None = None  # the plan it waits for before it may start (store/plans.py)


@dataclass(frozen=True)
class DelegateResult:
    task: Task
    created: bool  # False when an identical delegation of the same turn already existed


@dataclass(frozen=True)
class SettleResult:
    applied: (
        bool  # False when the task was no longer this worker's to settle (cancelled, lease lost)
    )
    task: Task | None
    woke: list[str] = field(default_factory=list)  # tasks that became todo as a consequence
    claimed: list[Task] = field(default_factory=list)  # of those, claimed for the settler
    # The subtasks of each claimed task that was woken, as the settle's own transaction left
    # them: all ended, so its session needs no read of them (store/handover.py).
    subtasks: dict[str, list[Task]] = field(default_factory=dict)


V = TypeVar("V")  # what a checked write's decision returns (append_checked)
EventListener = Callable[[list[Event]], None]
# Log entries (kind, task_id, agent, data) a caller asks a write to append with its own.
PendingEvents = Sequence[tuple[str, str | None, str | None, dict[str, Any]]]


class Store(Protocol):
    url: str
    dialect: str  # "sqlite" or "postgresql"
    created: bool  # a file made by this open: it holds only what this process put there
    background_delay: float  # seconds the start-up's background work waits (Team.start)

    # lifecycle
    def close(self) -> None: ...
    def subscribe(self, listener: EventListener) -> Callable[[], None]: ...
    def listen(
        self, listener: Callable[[Any], None], free_slots: Callable[[], int] | None = None
    ) -> Callable[[], None]: ...
    def warm(self, sessions: int) -> None: ...

    # runs and tasks
    def create_run(self, run: RunSpec, root: NewTask, task_id: str | None = None) -> Task: ...
    def create_run_and_claim(
        self,
        run: RunSpec,
        root: NewTask,
        worker_id: str,
        lease_seconds: float,
        global_limit: int | None = None,
        task_id: str | None = None,
    ) -> tuple[Task, list[Task]]: ...
    def run(self, run_id: str) -> RunSpec: ...
    def open_run_ids(self) -> list[str]: ...
    def delegate(
        self,
        parent_id: str,
        turn: int,
        new: NewTask,
        events: PendingEvents = (),
        worker_id: str | None = None,
    ) -> DelegateResult: ...
    def delegate_many(
        self,
        parent_id: str,
        turn: int,
        items: Sequence[tuple[PendingEvents, NewTask]],
        worker_id: str | None = None,
        events: PendingEvents = (),
    ) -> list[DelegateResult]: ...
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
    ) -> tuple[list[DelegateResult], list[Task]]: ...
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
    ) -> tuple[list[DelegateResult], SettleResult]: ...
    def claim(
        self, worker_id: str, limit: int, lease_seconds: float, global_limit: int | None = None
    ) -> list[Task]: ...
    def settle(
        self,
        task_id: str,
        worker_id: str,
        outcome: Outcome,
        events: PendingEvents = (),
        hand_over: float | None = None,
    ) -> SettleResult: ...
    def cancel(self, task_id: str, reason: str, by: str = "user") -> list[str]: ...
    def revoke(self, task_id: str, reason: str, by: str = "user") -> list[str]: ...
    def ended_by(self, seq: int) -> list[str]: ...
    def last_cancel_over(self, task_id: str) -> int | None: ...
    def recover(self, worker_alive: Callable[[str], bool | None]) -> dict[str, list[str]]: ...
    def renew_leases(
        self, worker_id: str, lease_seconds: float, task_ids: Iterable[str] | None = None
    ) -> list[str]: ...
    def release(self, worker_id: str, task_ids: Iterable[str], reason: str) -> list[str]: ...
    def add_usage(
        self, task_id: str, calls: int, prompt_tokens: int, completion_tokens: int
    ) -> None: ...
    # usage riding the calling thread's next write (store/usage.py)
    def owe_usage(
        self, task_id: str, calls: int, prompt_tokens: int, completion_tokens: int
    ) -> None: ...
    def owed_tokens(self, task_id: str) -> int: ...
    def pay_usage(self) -> None: ...

    # calls that wait for a person (store/approvals.py)
    def request_approval(
        self,
        task_id: str,
        worker_id: str,
        *,
        tool: str,
        args_json: str,
        args_digest: str,
        summary: str,
        rule: str,
        timeout: float | None,
        checked_seq: int,
        events: PendingEvents = (),
    ) -> Any: ...
    def decide_approval(
        self, approval_id: str, decision: str, by: str, note: str | None = None
    ) -> Any: ...
    def expire_approvals(self) -> list[Any]: ...
    def claim_approved(self, task_id: str, worker_id: str) -> tuple[list[Any], list[Any]]: ...
    def finish_approved(
        self, approval_id: str, worker_id: str, result: str, ok: bool, events: PendingEvents = ()
    ) -> bool: ...
    def approvals(
        self,
        *,
        status: str | None = None,
        task_id: str | None = None,
        root_id: str | None = None,
        limit: int = 1000,
    ) -> list[Any]: ...
    def get_approval(self, approval_id: str) -> Any: ...

    # questions to a person (store/questions.py) and notes from people (store/notes.py)
    def ask_question(
        self, task_id: str, worker_id: str, question: str, events: PendingEvents = ()
    ) -> Any: ...
    def answer_question(self, question_id: str, by: str, answer: str) -> Any: ...
    def questions(
        self,
        *,
        status: str | None = None,
        task_id: str | None = None,
        root_id: str | None = None,
        limit: int = 1000,
    ) -> list[Any]: ...
    def get_question(self, question_id: str) -> Any: ...
    def requests(self, task_id: str, limit: int = 1000) -> tuple[list[Any], list[Any]]: ...
    def add_note(self, task_id: str, by: str, text: str) -> Any: ...
    def notes(self, task_id: str, limit: int = 50) -> list[Any]: ...

    # events
    def append_events(
        self, items: list[tuple[str, str | None, str | None, dict[str, Any]]]
    ) -> list[Event]: ...
    def events_after(
        self,
        seq: int,
        limit: int = 1000,
        task_ids: Iterable[str] | None = None,
        with_cancels: bool = False,
        kinds: Iterable[str] | None = None,
    ) -> list[Event]: ...
    def last_seq(self) -> int: ...
    def append_checked(
        self,
        task_id: str,
        owed: PendingEvents,
        decide: Callable[[CheckState], tuple[V, PendingEvents]],
    ) -> tuple[V, list[Event]]: ...
    def event_span(self, task_ids: Iterable[str]) -> tuple[int, int] | None: ...
    def wait_for_change(self, after_seq: int, timeout: float) -> bool: ...

    # reads
    def get_task(self, task_id: str) -> Task: ...
    def session_state(self, task_id: str) -> tuple[Status, bool, str | None] | None: ...
    def lineage(self, task_id: str) -> tuple[int, list[Task]]: ...
    def state_at_head(self, task_id: str) -> CheckState: ...
    def children(self, task_id: str) -> list[Task]: ...
    def subtree(self, task_id: str) -> list[Task]: ...
    def list_tasks(
        self,
        *,
        status: str | None = None,
        assignee: str | None = None,
        root_id: str | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[Task]: ...
    def counts(self, root_id: str | None = None) -> dict[str, int]: ...
    def counts_by_root(self, root_ids: list[str]) -> dict[str, dict[str, int]]: ...
    def has_open_work(self, root_id: str) -> bool: ...
    def run_summaries(self, limit: int = 50, offset: int = 0) -> list[Any]: ...
    def run_events(self, run_id: str, after: int = 0, limit: int = 1000) -> list[Event]: ...
