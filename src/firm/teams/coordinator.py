"""The coordinator: a deterministic brain at the top of a team that runs its process.

Each session of the team's root task reads where the run stands (ledger.read) and takes
one step through the engine's normal delegation:

- hierarchical: hand the manager its next turn and end the session; woken when the turn
  (and the team task it started) has ended, look again;
- sequential: hand the next team task, in order, to its agent, with the results before it;
  a run of consecutive tasks marked async_execution is handed out at once, in one
  transaction, and the task after them waits for them all.

It ends the run when there is nothing left to do: done, with the last team task's output
as the result, when every task is done; failed, with the reason, otherwise — a manager
that stopped early, failed, ran out of turns, or tasks that kept failing.
`next_step` is the decision, pure; `run_coordinator` carries it out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from firm.events import EventKind
from firm.tasks import Status
from firm.teams.ledger import TeamState, read
from firm.teams.prompts import turn_brief, worker_description
from firm.teams.review import REVIEW_KINDS, review_question, reviews_from
from firm.teams.spec import (
    MAX_RETRIES,
    TaskSpec,
    TeamSpec,
    task_id_of,
    turn_title,
    worker_title,
)

if TYPE_CHECKING:
    from firm.brains.protocol import Session


@dataclass(frozen=True)
class Delegate:
    assignee: str
    title: str
    description: str


@dataclass(frozen=True)
class Finish:
    result: str


@dataclass(frozen=True)
class Fail:
    reason: str


@dataclass(frozen=True)
class AskReview:
    question: str


Step = Delegate | Finish | Fail | AskReview


def next_step(spec: TeamSpec, state: TeamState) -> Step | list[Delegate]:
    """What the coordinator does now. A list: several delegations at once, then wait —
    background tasks that start together, or those a crashed session of this same turn
    already made (re-issued, they come back as the existing tasks)."""
    if state.open_children:
        return [Delegate(c.assignee, c.title, c.description) for c in state.open_children]
    for waiting in state.in_review():  # human_input: a person accepts it, or sends it back
        assert waiting.firm_id is not None and waiting.agent is not None
        name = spec.member(waiting.agent).name
        return AskReview(review_question(waiting.id, waiting.firm_id, name, waiting.output or ""))
    if spec.hierarchical:
        return _hierarchical(spec, state)
    return _sequential(spec, state)


def _not_done(state: TeamState) -> str:
    return ", ".join(t for t, s in state.tasks.items() if not s.done)


def _finish(spec: TeamSpec, state: TeamState) -> Finish:
    return Finish(state.tasks[spec.tasks[-1].id].output or "")


def _hierarchical(spec: TeamSpec, state: TeamState) -> Step:
    assert spec.manager is not None
    last = state.turns[-1] if state.turns else None
    if last is not None and last.task.status == Status.FAILED:
        return Fail(
            f"the manager failed in turn {last.number} ({last.task.id}): "
            f"{last.task.error or 'no reason given'}"
        )
    if last is not None and last.task.status == Status.CANCELLED:
        return Fail(f"the manager failed: turn {last.number} ({last.task.id}) was cancelled")
    if state.all_done:
        return _finish(spec, state)
    if not state.pending():
        return Fail(
            f"the manager failed: task(s) {', '.join(state.excluded())} could not be done "
            f"(excluded after {MAX_RETRIES + 1} failures, or cancelled)"
        )
    if last is not None and last.action == "stop":
        return Fail(
            f"the manager failed: it stopped in turn {last.number} with task(s) not done: "
            f"{_not_done(state)}"
        )
    if len(state.turns) >= spec.max_iter:
        return Fail(
            f"the manager failed: it used all {spec.max_iter} turns (max_iter) with task(s) "
            f"not done: {_not_done(state)}"
        )
    number = len(state.turns) + 1
    return Delegate(spec.manager.id, turn_title(number), turn_brief(spec, state, number))


def _sequential(spec: TeamSpec, state: TeamState) -> Step | list[Delegate]:
    batch: list[TaskSpec] = []
    for task in spec.tasks:
        s = state.tasks[task.id]
        if s.done:
            continue
        if s.status == "excluded":
            why = "it was cancelled" if s.cancelled else f"it failed {len(s.failures)} times"
            return Fail(f"task {task.id} could not be done ({why}): {s.failures[-1]}")
        if batch and not _joins(task, batch):
            break
        batch.append(task)
        if not task.async_execution:
            break
    if not batch:
        return _finish(spec, state)
    steps = [Delegate(t.agent or "", worker_title(t), worker_description(spec, t, state))
             for t in batch]  # fmt: skip
    return steps if len(steps) > 1 else steps[0]


def _joins(task: TaskSpec, batch: list[TaskSpec]) -> bool:
    """Whether `task` starts with the background tasks of `batch`: it runs in the
    background too, and needs none of their results."""
    if not task.async_execution:
        return False
    return not set(task.context or ()) & {t.id for t in batch}


def run_coordinator(session: Session, spec: TeamSpec) -> None:
    reviews = {}
    if spec.reviewed:
        reviews = reviews_from(session.events_of([session.task_id], REVIEW_KINDS))
    state = read(spec, session.subtree(), reviews)
    _log_exclusion(session, state)
    step = next_step(spec, state)
    steps = step if isinstance(step, list) else [step]
    delegations = [s for s in steps if isinstance(s, Delegate)]
    if delegations:
        # One transaction: tasks handed out together start together, and the turn ends
        # with them.
        with session.batch_delegations() as batch:
            results = [
                session.call(
                    "delegate_task",
                    {"assignee": s.assignee, "title": s.title, "description": s.description},
                )
                for s in delegations
            ]
            if all(r.ok for r in results):
                batch.end_turn()
        failed = next((r for r in results if not r.ok), None)
        if failed is not None:  # the chart is generated, so this is firm's bug, not the user's
            session.call("fail_task", {"reason": f"could not delegate: {failed.content}"})
        return
    for s in steps:
        if isinstance(s, AskReview):
            asked = session.call("ask_human", {"question": s.question})
            if not asked.ok:
                session.call(
                    "fail_task", {"reason": f"could not ask for a review: {asked.content}"}
                )
        elif isinstance(s, Finish):
            _ended(session, "done", None)
            session.call("complete_task", {"result": s.result})
        elif isinstance(s, Fail):
            _ended(session, "failed", s.reason)
            session.call("fail_task", {"reason": s.reason})


def _log_exclusion(session: Session, state: TeamState) -> None:
    """A team task the last turn's failure excluded goes into the log once, when seen."""
    last = state.turns[-1] if state.turns else None
    if last is None or state.open_children:
        return
    for turn in state.turns:
        if turn.task.id != last.task.id or turn.worker is None:
            continue
        task = state.tasks.get(task_id_of(turn.worker.title))
        if task is None or task.status != "excluded" or task.attempts[-1:] != [turn.worker.id]:
            continue
        data = {"task_id": task.id, "failures": len(task.failures), "reason": task.failures[-1]}
        session.log(EventKind.TEAM_TASK_EXCLUDED, data)  # the session's agent is COORDINATOR


def _ended(session: Session, status: str, reason: str | None) -> None:
    # Rides the ending's settle (the complete_task or fail_task that follows), ahead of it:
    # one commit on the way from the run's last task to `Team.start()` returning, not two.
    with session.owing():
        session.log(EventKind.TEAM_ENDED, {"status": status, "reason": reason})
