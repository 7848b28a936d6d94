"""One manager turn: the manager's model chooses a task and a member, firm checks the choice,
and the chosen member does the task as a subtask of the turn.

The turn's first session asks the model (through the LLM brain's loop, with the strictest
response format the provider takes — see formats.py — and only the manager's own tools) and
judges each answer. An invalid answer goes back to the model with what was wrong and the
valid choices — at most MAX_REPROMPTS times in a row; the next invalid answer fails the
turn, and with it the run. A valid one ends the turn as a decision: `stop`, a reselection
(logged, nothing run), or `execute`, which delegates the team task to the member and ends
the session. Woken when that task has ended, the turn completes with a record of what
happened; it makes no model call then.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from firm.brains.llm_client import RetryPolicy
from firm.brains.llm_loop import SessionLoop
from firm.errors import FirmError
from firm.events import EventKind
from firm.teams.decision import Choices, Verdict, judge
from firm.teams.formats import FormatFallbackClient, mode_in_effect
from firm.teams.ledger import read
from firm.teams.prompts import manager_system, worker_description
from firm.teams.spec import MAX_REPROMPTS, TeamSpec, worker_title

if TYPE_CHECKING:
    from firm.brains.llm import LLMBrain
    from firm.brains.llm_loop import AnswerCheck
    from firm.brains.protocol import Session
    from firm.tools.registry import ToolDef


def run_manager_turn(session: Session, spec: TeamSpec, llm: LLMBrain) -> None:
    children = session.subtasks
    if children:
        _after_delegating(session, children)
        return
    assert spec.manager is not None
    tree = session.subtree(session.task.root_id)
    state = read(spec, tree)
    choices = Choices(
        tasks={t: s.status for t, s in state.tasks.items()},
        members={m.id: m.name for m in spec.members},
        manager_id=spec.manager.id,
        manager_name=spec.manager.name,
        own_turn=session.task_id,
        failures={t: len(s.failures) for t, s in state.tasks.items()},
    )
    number = next((t.number for t in state.turns if t.task.id == session.task_id), None)
    decided: list[Verdict] = []
    rejected: list[str] = []

    def check(answer: str) -> str | None:
        verdict = judge(answer, choices)
        _log(session, number, verdict, answer)
        if verdict.accepted:
            decided.append(verdict)
            return None
        rejected.append(verdict.reason)
        if len(rejected) > MAX_REPROMPTS:
            session.give_up(
                f"the manager gave {len(rejected)} invalid answers in a row; the last: "
                f"{verdict.reason}"
            )
            return None
        return verdict.reason

    tools = [t for t in session.tools() if not t.lifecycle]
    _ask(session, spec, llm, tools, number, [t.task.id for t in state.turns], check)
    if session.ended:
        return
    if not decided:
        session.give_up("the manager ended its turn without a decision")
        return
    verdict = decided[-1]
    if verdict.kind != "execute":
        _complete(session, verdict.record())
        return
    assert verdict.task_id is not None and verdict.agent_id is not None
    task = spec.task(verdict.task_id)
    result = session.call(
        "delegate_task",
        {
            "assignee": verdict.agent_id,
            "title": worker_title(task),
            "description": worker_description(spec, task, state),
        },
    )
    if not result.ok:
        session.give_up(f"could not hand {task.id} to {verdict.agent_name}: {result.content}")


def _ask(
    session: Session,
    spec: TeamSpec,
    llm: LLMBrain,
    tools: list[ToolDef],
    number: int | None,
    turn_ids: list[str],
    check: AnswerCheck,
) -> None:
    """The LLM brain's loop, through a client that falls back to a weaker response format
    when the provider rejects the current one (and remembers it in the log)."""
    try:
        settings = llm.settings_for(session.org, session.agent_id)
    except FirmError as exc:
        session.give_up(str(exc))
        return
    names = [t.model_name for t in tools]
    mode = mode_in_effect(session, spec, turn_ids)
    client = FormatFallbackClient(
        settings.endpoint,
        RetryPolicy(llm.max_retries, llm.backoff, llm.backoff_max),
        mode=mode,
        system_for=lambda m: manager_system(spec, names, m),
        turn=number,
    )
    try:
        loop = SessionLoop(
            session,
            settings.loop,
            client,
            system=manager_system(spec, names, mode),
            tools=tools,
            check_answer=check,
        )
        loop.run()
    finally:
        client.close()


def _after_delegating(session: Session, children: list[Any]) -> None:
    worker = children[0]
    if not worker.terminal:
        # A session of this turn crashed after delegating: re-issuing the same delegation
        # returns the existing task, and the turn waits for it again.
        session.call(
            "delegate_task",
            {"assignee": worker.assignee, "title": worker.title, "description": worker.description},
        )
        return
    record = {
        "action": "execute",
        "task_id": worker.title.split(": ", 1)[0],
        "agent_name": session.org.agent(worker.assignee).name,
        "worker_task": worker.id,
        "outcome": str(worker.status),
    }
    _complete(session, record)


def _complete(session: Session, record: dict[str, Any]) -> None:
    session.call("complete_task", {"result": json.dumps(record, ensure_ascii=False)})


def _log(session: Session, number: int | None, verdict: Verdict, answer: str) -> None:
    data: dict[str, Any] = {"turn": number, "verdict": verdict.kind}
    if verdict.task_id is not None:
        data["task_id"] = verdict.task_id
    if verdict.agent_name is not None:
        data["agent_name"] = verdict.agent_name
    if verdict.reason:
        data["reason"] = verdict.reason
    if verdict.kind == "rejected":
        data["answer"] = answer[:500]
    session.log(EventKind.MANAGER_DECISION, data)
