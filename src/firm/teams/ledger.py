"""Where a team run stands, read from its firm tasks alone. Pure.

The store is the only memory a team has: each session of the coordinator or of a manager
turn reads the run's subtree and derives the same state from it, so a run killed at any
point continues from what was recorded, and nothing is run or counted twice.

- hierarchical: the root's children are manager turns; a turn that chose a task to run
  has it as a child, the team task's firm task (its title starts with the team task's id).
  A turn that chose background tasks (async_execution) has one child per choice, made one
  after the other in the same session while the earlier ones run. Each choice counts as a
  turn of the manager (`Turn`); the firm task's result is a JSON record of its decisions.
- sequential: the root's children are the team tasks' firm tasks.

A task marked human_input is done only when a person accepts an attempt's output (its
review, teams/review.py); until then it is `review`, and feedback sends it back to pending.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from firm.tasks import Status, Task
from firm.teams.review import Review
from firm.teams.spec import MAX_RETRIES, TaskSpec, TeamSpec, task_id_of


@dataclass
class TaskState:
    id: str
    status: str = "pending"  # pending | running | review (waits for a person) | done | excluded
    output: str | None = None
    agent: str | None = None  # the member who did it (or is doing it)
    firm_id: str | None = None  # the firm task that did it
    carried: bool = False  # done in an earlier start() of the team
    failures: list[str] = field(default_factory=list)
    attempts: list[str] = field(default_factory=list)  # firm task ids, in order
    cancelled: bool = False
    feedback: list[tuple[str, str]] = field(default_factory=list)  # (output, feedback), in order

    @property
    def done(self) -> bool:
        return self.status == "done"

    @property
    def running(self) -> bool:
        return self.status == "running"


@dataclass
class Turn:
    """One decision of the manager. Several share a firm task when background tasks were
    chosen one after the other in one session."""

    number: int
    task: Task  # the manager turn's firm task
    record: dict[str, Any] | None  # its decision, once the turn is done
    worker: Task | None  # the team task's firm task it started, if any

    @property
    def action(self) -> str | None:
        if self.worker is not None:
            return "execute"
        return None if self.record is None else str(self.record.get("action"))

    def trace(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "turn": self.number,
            "task": self.task.id,
            "status": str(self.task.status),
            "action": self.action,
        }
        if self.record:
            for key in ("task_id", "agent_name", "note", "async_execution"):
                if key in self.record:
                    out[key] = self.record[key]
        if self.worker is not None:
            out["task_id"] = task_id_of(self.worker.title)
            out["worker_task"] = self.worker.id
            out["outcome"] = str(self.worker.status)
        if self.task.error:
            out["error"] = self.task.error
        return out


@dataclass
class TeamState:
    tasks: dict[str, TaskState]  # in the team's order
    turns: list[Turn]
    open_children: list[Task]  # open children of the root (only after a crash mid-session)

    def pending(self) -> list[str]:
        return [t.id for t in self.tasks.values() if t.status == "pending"]

    def running(self) -> list[str]:
        return [t.id for t in self.tasks.values() if t.running]

    def waits_for(self, task: TaskSpec) -> list[str]:
        """The running tasks whose results `task` must have before it starts: those its
        context names; with no context given, every running one unless it runs in the
        background itself (a task that waits gets the results of the background tasks
        before it, as CrewAI's processes do)."""
        running = self.running()
        if task.context is not None:
            return [t for t in task.context if t in running]
        return [] if task.async_execution else running

    def choosable(self, spec: TeamSpec) -> list[str]:
        """Tasks that can start now: not started (or failed and tried again), with every
        result they build on in."""
        return [t.id for t in spec.tasks if self.tasks[t.id].status == "pending"
                and not self.waits_for(t)]  # fmt: skip

    def excluded(self) -> list[str]:
        return [t.id for t in self.tasks.values() if t.status == "excluded"]

    @property
    def all_done(self) -> bool:
        return all(t.done for t in self.tasks.values())

    def in_review(self) -> list[TaskState]:
        """Tasks whose latest output waits for a person's acceptance (human_input)."""
        return [t for t in self.tasks.values() if t.status == "review"]


def read(
    spec: TeamSpec, tree: list[Task], reviews: Mapping[str, Review] | None = None
) -> TeamState:
    """The state of the run whose subtree (root first, parents before children) is `tree`;
    `reviews` are people's reviews of human_input tasks' attempts, by attempt (firm task id)."""
    tasks = {t.id: TaskState(t.id) for t in spec.tasks}
    reviewed = _Reviewed({t.id for t in spec.tasks if t.human_input}, reviews or {})
    for tid, output in spec.carried.items():
        if tid in tasks:
            tasks[tid] = TaskState(tid, "done", output, carried=True)
    if not tree:
        return TeamState(tasks, [], [])
    root = tree[0]
    children: dict[str, list[Task]] = {}
    for t in tree[1:]:
        children.setdefault(t.parent_id or "", []).append(t)
    direct = children.get(root.id, [])
    open_children = [c for c in direct if not c.terminal]

    turns: list[Turn] = []
    if spec.hierarchical:
        manager = spec.manager.id if spec.manager else None
        for c in direct:
            if c.assignee != manager:
                continue
            record = _record(c)
            workers = children.get(c.id, [])
            for worker in workers:
                turns.append(Turn(len(turns) + 1, c, _worker_record(record, worker), worker))
                _apply(tasks, worker, reviewed)
            if not workers or (record is not None and record.get("action") != "execute"):
                turns.append(Turn(len(turns) + 1, c, record, None))
    else:
        for c in direct:
            _apply(tasks, c, reviewed)
    return TeamState(tasks, turns, open_children)


def _record(turn: Task) -> dict[str, Any] | None:
    if turn.status != Status.DONE or not turn.result:
        return None
    try:
        data = json.loads(turn.result)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _worker_record(record: dict[str, Any] | None, worker: Task) -> dict[str, Any] | None:
    """The record of the decision that started `worker`, from its turn's record."""
    if record is None:
        return None
    for one in record.get("decisions") or [record]:
        if isinstance(one, dict) and one.get("worker_task") == worker.id:
            return one
    return None


@dataclass(frozen=True)
class _Reviewed:
    tasks: set[str]  # the team tasks marked human_input
    reviews: Mapping[str, Review]


def _apply(tasks: dict[str, TaskState], worker: Task, reviewed: _Reviewed) -> None:
    """Fold one firm task of a team task into that task's state."""
    state = tasks.get(task_id_of(worker.title))
    if state is None or state.done or state.status == "excluded":
        return  # a task already settled is never counted twice
    state.attempts.append(worker.id)
    if not worker.terminal:
        state.status, state.agent = "running", worker.assignee
    elif worker.status == Status.DONE:
        state.status, state.output = "done", worker.result or ""
        state.agent, state.firm_id = worker.assignee, worker.id
        if state.id in reviewed.tasks:
            review = reviewed.reviews.get(worker.id)
            if review is None or review.answer is None:
                state.status = "review"
            elif not review.accepted:
                state.feedback.append((state.output, review.answer))
                state.status, state.output = "pending", None
    elif worker.status == Status.FAILED:
        state.failures.append(worker.error or "no reason given")
        state.status = "excluded" if len(state.failures) > MAX_RETRIES else "pending"
    elif worker.status == Status.CANCELLED:
        state.status, state.cancelled = "excluded", True
        state.failures.append(worker.error or "cancelled")
