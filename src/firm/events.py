"""Every kind of event firm writes to its log, with the shape of its data. Pure data, no I/O.

The activity log and the audit trail are one table of events: a kind, the task and agent it
concerns, and a JSON object of data. This module names each kind once (`EventKind`, a str
enum, so the stored values are plain strings) and gives the schema of its data (a TypedDict,
checked by pydantic). The store refuses an event whose kind is not here or whose data does
not fit (`validate`, on the append path); readers — the verifier, the terminal, the team
runner, the office page (through a generated `catalogue.js`) — take kinds from here.

Reading stays lenient: an event stored by an older version loads and verifies as it is,
whatever its kind or data. Only what is written now must fit the catalogue.

To add a kind: a member of `EventKind`, a TypedDict for its data, an entry in `CATALOGUE`,
then regenerate the page's copy (`python -m firm.server.catalogue`) and add a row to
docs/office.md. docs/architecture.md says it at more length.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import Any, NotRequired

from pydantic import ConfigDict, TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from firm.errors import FirmError
from firm.tasks import TRANSITIONS, Status

KIND_MAX_LENGTH = 32  # the width of the events table's kind column


class EventKind(StrEnum):
    # a task's life (each moves its task to the status in CATALOGUE)
    CREATED = "created"
    DELEGATED = "delegated"
    STARTED = "started"
    WAITING = "waiting"
    WOKEN = "woken"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REQUEUED = "requeued"
    REVOKED = "revoked"
    # what a session does
    THOUGHT = "thought"
    TOOL_STARTED = "tool_started"
    TOOL_CALL = "tool_call"
    TOOL_DENIED = "tool_denied"
    TOOL_ERROR = "tool_error"
    # people in the chain of command
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_DECIDED = "approval_decided"
    APPROVAL_CLAIMED = "approval_claimed"
    NOTE = "note"
    QUESTION_ASKED = "question_asked"
    QUESTION_ANSWERED = "question_answered"
    QUESTION_WITHDRAWN = "question_withdrawn"
    # the LLM brain
    MODEL_CALL = "model_call"
    MODEL_RETRY = "model_retry"
    MODEL_ERROR = "model_error"
    # teams
    MANAGER_DECISION = "manager_decision"
    MANAGER_OUTPUT_DOWNGRADED = "manager_output_downgraded"
    TEAM_TASK_EXCLUDED = "team_task_excluded"
    TEAM_ENDED = "team_ended"
    # the store and the audit trail
    CHECKPOINT = "checkpoint"
    SETTING = "setting"


class InvalidEvent(FirmError, ValueError):
    """An event the catalogue does not allow: an unknown kind, or data of the wrong shape."""


# --- the data of each kind ------------------------------------------------------------------
# Keys a writer adds only sometimes are NotRequired; any other key is refused, so a typo in a
# writer fails its tests instead of reaching the log.

Grant = dict[str, Any]  # authority/grants.Grant.to_dict(); the verifier parses it


class Created(TypedDict):
    title: str
    description: str
    priority: str
    language: str
    created_by: str
    grant: Grant | None
    brain: str
    org_sha256: str


class LifecycleCall(TypedDict):
    """The call a `delegated`, `completed` or `failed` entry carries: delegate_task,
    complete_task, fail_task (firm/endcall.py): a tool_call's fields, allowed and ok by being
    here."""

    tool: str
    args_digest: str
    result_digest: str
    summary: str
    checked_seq: int
    checked_at: float
    limited_args: NotRequired[dict[str, Any]]
    ceilings: NotRequired[dict[str, str]]


class Delegated(TypedDict):
    to: str
    title: str
    description: str
    priority: str
    language: str
    parent_id: str
    grant: Grant | None
    plan: NotRequired[str]  # the plan it waits for: not started until a person approves it
    call: NotRequired[LifecycleCall]  # the delegate_task call, logged with its effect


class Started(TypedDict):
    attempt: int
    turn: int
    worker: str


class Waiting(TypedDict):
    open_subtasks: int
    pending_approvals: NotRequired[int]  # calls waiting for a person's decision


class Woken(TypedDict):
    immediately: NotRequired[bool]  # its reports had all ended before its turn did
    recovered: NotRequired[bool]  # woken by recovery at start-up


class Completed(TypedDict):
    result: str | None
    files: list[str]
    call: NotRequired[LifecycleCall]  # the complete_task call, logged with its effect


class Failed(TypedDict):
    error: str | None
    call: NotRequired[LifecycleCall]  # the fail_task call, logged with its effect


class Cancelled(TypedDict):
    reason: str
    by: str
    plan: NotRequired[str]  # cancelled because this plan was denied or timed out
    # A whole subtree's cancel, one entry on its root (firm/endings.py): how many tasks it
    # ended and the digest of their ids; the tasks name the entry (tasks.cancelled_by_seq).
    ended: NotRequired[int]
    ended_sha256: NotRequired[str]


class Requeued(TypedDict):
    reason: str
    cause: NotRequired[str]  # worker_dead | lease_expired (recovery)
    attempt: NotRequired[int]
    worker: NotRequired[str | None]


class Revoked(TypedDict):
    reason: str
    by: str
    origin: str  # the task whose revocation reached this one
    revoked: NotRequired[int]  # one entry for the subtree: how many tasks it newly revoked


class Thought(TypedDict):
    text: str
    superseded: NotRequired[bool]  # it rode a write after its session was cut off


class ToolCall(TypedDict):
    tool: str
    allowed: bool
    ok: bool
    args_digest: str
    result_digest: str
    summary: str
    checked_seq: int
    checked_at: float
    limited_args: NotRequired[dict[str, Any]]
    ceilings: NotRequired[dict[str, str]]
    error: NotRequired[str]
    superseded: NotRequired[bool]  # written after its session was cut off
    approval: NotRequired[str]  # the approval this call ran under
    started_seq: NotRequired[int]  # the tool_started entry written before the body ran
    interrupted: NotRequired[bool]  # the body's session was cut off: it may have run


class ToolStarted(TypedDict):
    """Written and committed before a body runs: no body runs without its record."""

    tool: str
    args_digest: str
    summary: str
    checked_seq: int
    checked_at: float
    limited_args: NotRequired[dict[str, Any]]
    ceilings: NotRequired[dict[str, str]]


class ToolDenied(TypedDict):
    tool: str
    allowed: bool
    code: str
    reason: str
    args_digest: str
    summary: str
    checked_seq: int
    checked_at: float
    limited_args: NotRequired[dict[str, Any]]
    ceilings: NotRequired[dict[str, str]]
    superseded: NotRequired[bool]
    approval: NotRequired[str]  # the approved call, denied when it came to run


class ApprovalRequested(TypedDict):
    id: str
    tool: str
    args_digest: str
    summary: str
    rule: str  # the chart's entry that asked for it
    timeout_at: float | None
    checked_seq: NotRequired[int]  # a call's: where its authority check stood in the log
    subtasks: NotRequired[list[str]]  # a plan's (tool delegate_task): the subtasks it holds


class ApprovalDecided(TypedDict):
    id: str
    decision: str  # approved | denied | timed_out | withdrawn
    by: str
    tool: str
    args_digest: str
    note: NotRequired[str]


class ApprovalClaimed(TypedDict):
    id: str
    tool: str
    args_digest: str
    worker: str


class Note(TypedDict):
    by: str  # the person (the OS user, or the name an API token stands for)
    text: str


class QuestionAsked(TypedDict):
    id: str
    question: str


class QuestionAnswered(TypedDict):
    id: str
    by: str
    answer: str


class QuestionWithdrawn(TypedDict):
    id: str
    by: str
    reason: str


class ToolErrorData(TypedDict):
    tool: str
    error: str


class ModelCall(TypedDict):
    model: str
    call: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None
    tool_calls: list[str]
    finish_reason: str | None
    seconds: float
    estimated: NotRequired[bool]


class ModelRetry(TypedDict):
    attempt: int
    delay: float
    error: str


class ModelError(TypedDict):
    error: str


class ManagerDecision(TypedDict):
    turn: int | None
    verdict: str  # execute | stop | reselected | rejected
    task_id: NotRequired[str]
    agent_name: NotRequired[str]
    reason: NotRequired[str]
    answer: NotRequired[str]


# "from" is a keyword, hence the functional form.
ManagerOutputDowngraded = TypedDict(
    "ManagerOutputDowngraded", {"turn": int, "from": str, "to": str, "error": str}
)


class TeamTaskExcluded(TypedDict):
    task_id: str
    failures: int
    reason: str


class TeamEnded(TypedDict):
    status: str
    reason: str | None


class Checkpoint(TypedDict):
    seq: int
    hash: str
    signature: str
    public_key: str
    reason: str


class Setting(TypedDict):
    max_running: int | None


# --- the catalogue --------------------------------------------------------------------------

# Strict: no coercion ("3" is not an int), so what is checked is what is stored.
_CONFIG = ConfigDict(strict=True, extra="forbid")


@dataclass(frozen=True)
class KindSpec:
    kind: EventKind
    doc: str  # one line: what happened
    data: type  # the TypedDict of its data
    status: Status | None = None  # the status its task is in after it
    creates: bool = False  # it brings its task into being

    def __post_init__(self) -> None:
        # Every kind's data is checked the same way (pydantic reads a TypedDict's config from
        # this attribute).
        self.data.__pydantic_config__ = _CONFIG  # type: ignore[attr-defined]

    @cached_property
    def adapter(self) -> TypeAdapter[Any]:
        # Compiling an adapter is the costly part: once per kind, and only for kinds a process
        # writes or reads (building all of them on import cost every `firm` command ~0.1 s).
        return TypeAdapter(self.data)

    @cached_property
    def validator(self) -> Any:
        # The adapter's compiled validator, called directly: TypeAdapter.validate_python is a
        # Python frame that passes eight keyword defaults on (as much as validating a small
        # entry's data), and every entry the store appends passes here.
        return self.adapter.validator


CATALOGUE: dict[EventKind, KindSpec] = {
    s.kind: s
    for s in [
        KindSpec(EventKind.CREATED, "a goal was given", Created, status=Status.TODO, creates=True),
        KindSpec(
            EventKind.DELEGATED,
            "a manager handed out a subtask",
            Delegated,
            status=Status.TODO,
            creates=True,
        ),
        KindSpec(
            EventKind.STARTED, "a session began on the task", Started, status=Status.IN_PROGRESS
        ),
        KindSpec(
            EventKind.WAITING, "the manager waits on its reports", Waiting, status=Status.WAITING
        ),
        KindSpec(
            EventKind.WOKEN, "the manager's reports have all ended", Woken, status=Status.TODO
        ),
        KindSpec(EventKind.COMPLETED, "the task is done", Completed, status=Status.DONE),
        KindSpec(EventKind.FAILED, "the task failed", Failed, status=Status.FAILED),
        KindSpec(EventKind.CANCELLED, "the task was cancelled", Cancelled, status=Status.CANCELLED),
        KindSpec(
            EventKind.REQUEUED,
            "a session was lost; back in the queue",
            Requeued,
            status=Status.TODO,
        ),
        KindSpec(EventKind.REVOKED, "the task's authority was revoked", Revoked),
        KindSpec(EventKind.THOUGHT, "the agent's thinking", Thought),
        KindSpec(
            EventKind.TOOL_STARTED,
            "a checked tool call is about to run (recorded before its body)",
            ToolStarted,
        ),
        KindSpec(EventKind.TOOL_CALL, "a tool ran", ToolCall),
        KindSpec(
            EventKind.TOOL_DENIED, "a tool call was refused by the authority check", ToolDenied
        ),
        KindSpec(EventKind.TOOL_ERROR, "a tool call the model got wrong", ToolErrorData),
        KindSpec(
            EventKind.APPROVAL_REQUESTED,
            "a call waits for a person's approval",
            ApprovalRequested,
        ),
        KindSpec(
            EventKind.APPROVAL_DECIDED,
            "a person (or the timeout) decided a waiting call",
            ApprovalDecided,
        ),
        KindSpec(
            EventKind.APPROVAL_CLAIMED,
            "an approved call is about to run (once: a crash reports it as may have run)",
            ApprovalClaimed,
        ),
        KindSpec(EventKind.NOTE, "a person left a note on the task", Note),
        KindSpec(EventKind.QUESTION_ASKED, "the agent asked a person a question", QuestionAsked),
        KindSpec(
            EventKind.QUESTION_ANSWERED, "a person answered the agent's question", QuestionAnswered
        ),
        KindSpec(
            EventKind.QUESTION_WITHDRAWN,
            "a question no one answered was withdrawn (its task was cancelled)",
            QuestionWithdrawn,
        ),
        KindSpec(EventKind.MODEL_CALL, "the LLM brain called its model", ModelCall),
        KindSpec(EventKind.MODEL_RETRY, "a model call is retried", ModelRetry),
        KindSpec(EventKind.MODEL_ERROR, "a model call failed for good", ModelError),
        KindSpec(EventKind.MANAGER_DECISION, "a team's manager decided its turn", ManagerDecision),
        KindSpec(
            EventKind.MANAGER_OUTPUT_DOWNGRADED,
            "the model API refused the manager's answer format; a weaker one is used",
            ManagerOutputDowngraded,
        ),
        KindSpec(
            EventKind.TEAM_TASK_EXCLUDED,
            "a team task failed too often and is left out",
            TeamTaskExcluded,
        ),
        KindSpec(EventKind.TEAM_ENDED, "a team's run ended", TeamEnded),
        KindSpec(EventKind.CHECKPOINT, "the audit log's head was signed", Checkpoint),
        KindSpec(EventKind.SETTING, "a store-wide setting changed", Setting),
    ]
}


def kinds_into(*statuses: Status) -> frozenset[EventKind]:
    """The kinds that move their task into one of these statuses."""
    return frozenset(k for k, s in CATALOGUE.items() if s.status in statuses)


# Groups readers use, derived so they cannot disagree with the catalogue.
CREATION = frozenset(k for k, s in CATALOGUE.items() if s.creates)
# New work for the scheduler; a decision may approve a plan, releasing its subtasks.
TO_TODO = kinds_into(Status.TODO) | {EventKind.APPROVAL_DECIDED}
ENDINGS = kinds_into(*(s for s in Status if s.terminal))


def validate(kind: str, data: Any) -> EventKind:
    """The kind, if `kind` and `data` are an event the catalogue allows; else InvalidEvent."""
    spec = CATALOGUE.get(kind)  # type: ignore[call-overload]  # str keys find the members
    if spec is None:
        raise InvalidEvent(
            f"unknown event kind {kind!r}: add it to firm.events (known: "
            f"{', '.join(sorted(CATALOGUE))})"
        )
    try:
        spec.validator.validate_python(data)
    except ValidationError as exc:
        raise InvalidEvent(f"{spec.kind} event: {_problems(exc)}") from None
    return spec.kind


def _problems(exc: ValidationError) -> str:
    out = []
    for err in exc.errors(include_url=False)[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "data"
        out.append(f"{where}: {err['msg']}")
    return "; ".join(out)


# --- the task state machine, read from a log --------------------------------------------------


@dataclass(frozen=True)
class StatusChange:
    seq: int
    kind: EventKind
    task_id: str
    old: Status | None  # None: the task had no status yet (this event created it)
    new: Status


def status_changes(entries: Iterable[tuple[int, str, str | None]]) -> Iterator[StatusChange]:
    """Each task's status changes, from (seq, kind, task_id) in log order. A task is followed
    from its creation; the changes of tasks created before the entries begin are skipped."""
    status: dict[str, Status] = {}
    for seq, kind, task_id in entries:
        spec = CATALOGUE.get(kind)  # type: ignore[call-overload]
        if spec is None or spec.status is None or task_id is None:
            continue
        if spec.creates or task_id in status:
            yield StatusChange(seq, spec.kind, task_id, status.get(task_id), spec.status)
            status[task_id] = spec.status


def transition_problems(
    entries: Iterable[tuple[int, str, str | None]], tasks: set[str] | None = None
) -> list[str]:
    """Every recorded status change (of `tasks`, or of all) the state machine does not allow:
    tasks.TRANSITIONS, applied to the log."""
    problems = []
    for c in status_changes(entries):
        if tasks is not None and c.task_id not in tasks:
            continue
        if c.kind in CREATION:
            if c.old is not None:
                problems.append(f"entry {c.seq} ({c.kind}) creates task {c.task_id} again")
        elif c.old is not None and c.new not in TRANSITIONS[c.old]:
            problems.append(
                f"entry {c.seq} ({c.kind}) moves task {c.task_id} from {c.old} to {c.new}, "
                "which the task state machine does not allow"
            )
    return problems


# --- the catalogue as data, for the page and for API clients --------------------------------


def catalogue_data() -> dict[str, Any]:
    """The catalogue as JSON: each kind's description, the status it moves its task to, and
    the schema of its data; and the task state machine those statuses follow."""
    kinds = {}
    for kind, spec in CATALOGUE.items():
        kinds[kind.value] = {
            "name": kind.name,
            "doc": spec.doc,
            "status": spec.status.value if spec.status else None,
            "creates": spec.creates,
            "data": _untitled(spec.adapter.json_schema()),
        }
    statuses = {
        s.value: {"terminal": s.terminal, "next": sorted(n.value for n in TRANSITIONS[s])}
        for s in Status
    }
    return {"kinds": kinds, "statuses": statuses}


def _untitled(schema: Any) -> Any:
    """A JSON schema without the titles pydantic derives from key names (noise here)."""
    if isinstance(schema, dict):
        return {
            k: _untitled(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))
        }
    if isinstance(schema, list):
        return [_untitled(v) for v in schema]
    return schema
