"""Where a team run stands, read from its firm tasks alone. Pure.

The store is the only memory a team has: each session of the coordinator or of a manager
turn reads the run's subtree and derives the same state from it, so a run killed at any
point continues from what was recorded, and nothing is run or counted twice.

- hierarchical: the root's children are manager turns; a turn that chose a task to run
  has one child, the team task's firm task (its title starts with the team task's id).
  A turn's result is a JSON record of its decision.
- sequential: the root's children are the team tasks' firm tasks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from firm.tasks import Status, Task
from firm.teams.spec import MAX_RETRIES, TeamSpec, task_id_of


@dataclass
class TaskState:
    id: str
    status: str = "pending"  # pending | done | excluded
    output: str | None = None
    agent: str | None = None  # the member who did it
    firm_id: str | None = None  # the firm task that did it
    carried: bool = False  # done in an earlier start() of the team
    failures: list[str] = field(default_factory=list)
    attempts: list[str] = field(default_factory=list)  # firm task ids, in order
    cancelled: bool = False

    @property
    def done(self) -> bool:
        return self.status == "done"


@dataclass
class Turn:
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
            for key in ("task_id", "agent_name", "note"):
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

    def excluded(self) -> list[str]:
        return [t.id for t in self.tasks.values() if t.status == "excluded"]

    @property
    def all_done(self) -> bool:
        return all(t.done for t in self.tasks.values())


def read(spec: TeamSpec, tree: list[Task]) -> TeamState:
    """The state of the run whose subtree (root first, parents before children) is `tree`."""
    tasks = {t.id: TaskState(t.id) for t in spec.tasks}
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
            workers = children.get(c.id, [])
            turn = Turn(len(turns) + 1, c, _record(c), workers[0] if workers else None)
            turns.append(turn)
            if turn.worker is not None:
                _apply(tasks, turn.worker)
    else:
        for c in direct:
            _apply(tasks, c)
    return TeamState(tasks, turns, open_children)


def _record(turn: Task) -> dict[str, Any] | None:
    if turn.status != Status.DONE or not turn.result:
        return None
    try:
        data = json.loads(turn.result)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _apply(tasks: dict[str, TaskState], worker: Task) -> None:
    """Fold one firm task of a team task into that task's state."""
    state = tasks.get(task_id_of(worker.title))
    if state is None or state.done or state.status == "excluded":
        return  # a task already settled is never counted twice
    state.attempts.append(worker.id)
    if worker.status == Status.DONE:
        state.status, state.output = "done", worker.result or ""
        state.agent, state.firm_id = worker.assignee, worker.id
    elif worker.status == Status.FAILED:
        state.failures.append(worker.error or "no reason given")
        if len(state.failures) > MAX_RETRIES:
            state.status = "excluded"
    elif worker.status == Status.CANCELLED:
        state.status, state.cancelled = "excluded", True
        state.failures.append(worker.error or "cancelled")
