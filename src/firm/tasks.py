"""Tasks as pure data: states, the transitions between them, priorities and ids. No I/O."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from functools import lru_cache
from typing import Any


class Status(StrEnum):
    TODO = "todo"
    IN_PROGRESS = "in_progress"
    WAITING = "waiting"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({Status.DONE, Status.FAILED, Status.CANCELLED})
OPEN = frozenset(Status) - TERMINAL

# The whole state machine. in_progress -> todo covers two cases: a manager whose reports all
# finished before its session ended (invariant 2; logged as `waiting` then `woken`), and a
# session whose worker died or lost its lease (invariant 5; `requeued`). The log is checked
# against it: the audit verifier refuses a bundle whose tasks move otherwise
# (events.transition_problems), and a test shows real runs make every move here and no other.
TRANSITIONS: dict[Status, frozenset[Status]] = {
    Status.TODO: frozenset({Status.IN_PROGRESS, Status.CANCELLED}),
    Status.IN_PROGRESS: frozenset(
        {Status.DONE, Status.FAILED, Status.WAITING, Status.TODO, Status.CANCELLED}
    ),
    Status.WAITING: frozenset({Status.TODO, Status.CANCELLED}),
    Status.DONE: frozenset(),
    Status.FAILED: frozenset(),
    Status.CANCELLED: frozenset(),
}


class Priority(IntEnum):
    LOW = 0
    NORMAL = 1
    HIGH = 2
    URGENT = 3

    @classmethod
    def parse(cls, value: str | int | Priority) -> Priority:
        if isinstance(value, Priority):
            return value
        if isinstance(value, int):
            return cls(value)
        try:
            return cls[value.strip().upper()]
        except KeyError:
            names = ", ".join(p.name.lower() for p in cls)
            raise ValueError(f"unknown priority {value!r} (one of: {names})") from None

    def __str__(self) -> str:
        return self.name.lower()


def new_task_id() -> str:
    """A root task's id: 64 random bits (32 met a duplicate in a store of 100,000 runs).
    Ids made with 32 bits before stay valid; ids are opaque strings everywhere."""
    return "T-" + secrets.token_hex(8)


def normalise_title(title: str) -> str:
    """The key under which a delegation is made idempotent: case and spacing do not matter.
    Each run of whitespace becomes one space and the ends lose theirs, exactly as the regular
    expression this replaced did (str.split and re take the same characters for whitespace),
    at a quarter of its cost."""
    return " ".join(title.split()).casefold()


@dataclass(frozen=True)
class Task:
    id: str
    root_id: str
    parent_id: str | None
    title: str
    description: str
    status: Status
    assignee: str
    created_by: str
    priority: Priority = Priority.NORMAL
    language: str = "en"
    result: str | None = None
    files: tuple[str, ...] = ()
    error: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    turn: int = 0
    attempts: int = 0
    grant: dict[str, Any] | None = None
    revoked: bool = False
    worker_id: str | None = None
    lease_expires_at: float | None = None
    usage: dict[str, int] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "root_id": self.root_id,
            "parent_id": self.parent_id,
            "title": self.title,
            "description": self.description,
            "status": str(self.status),
            "assignee": self.assignee,
            "created_by": self.created_by,
            "priority": str(self.priority),
            "language": self.language,
            "result": self.result,
            "files": list(self.files),
            "error": self.error,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "turn": self.turn,
            "attempts": self.attempts,
            "grant": self.grant,
            "revoked": self.revoked,
            "usage": dict(self.usage),
        }


@dataclass(frozen=True)
class Outcome:
    """How a session ended, as the engine settles it."""

    kind: str  # "done" | "failed" | "yielded" (ended its turn after delegating)
    result: str | None = None
    files: tuple[str, ...] = ()
    error: str | None = None
    # A yielded turn whose delegations wait for a person (store/plans.py): the chart's rule
    # that asks, and how long the plan may wait.
    plan_rule: str | None = None
    plan_timeout: float | None = None

    @classmethod
    def done(cls, result: str, files: tuple[str, ...] | list[str] = ()) -> Outcome:
        return cls("done", result=result, files=tuple(files))

    @classmethod
    def failed(cls, reason: str) -> Outcome:
        return cls("failed", error=reason)

    @classmethod
    def yielded(cls) -> Outcome:
        return cls("yielded")


# The engine's task under a name of its own: `firm.Task` is a team's task (firm.teams).
TaskRecord = Task


# Kept for the last few hundred: a batched delegation's key is made by the session, for the
# subtask's id, and again by the store's write of the batch (~1 µs each time).
@lru_cache(maxsize=512)
def delegation_key(parent_id: str, turn: int, assignee: str, title: str) -> str:
    """What makes a delegation idempotent: its parent, turn, assignee and normalised title."""
    key_src = f"{parent_id}\x00{turn}\x00{assignee}\x00{normalise_title(title)}"
    return hashlib.sha256(key_src.encode()).hexdigest()[:40]


def subtask_id(key: str) -> str:
    """A delegated task's id follows from its delegation key, so a session can tell the model
    the id before the write (the delegations of one reply are written together) and a replay
    of the same turn names the same task. 64 bits: the parent's random id is part of the key."""
    return "T-" + key[:16]
