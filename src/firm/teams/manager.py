"""One manager turn: the manager's model chooses a task and a member, firm checks the choice,
and the chosen member does the task as a subtask of the turn.

The turn's first session asks the model (through the LLM brain's loop, with the strictest
response format the provider takes — see formats.py — and only the manager's own tools) and
judges each answer. An invalid answer goes back to the model with what was wrong and the
valid choices — at most MAX_REPROMPTS times in a row; the next invalid answer fails the
turn, and with it the run. A valid one is a decision: `stop`, a reselection (logged, nothing
run), or `execute`, which delegates the team task to the member. A task that runs in the
background (async_execution) does not end the session: the manager is asked again at once,
with a fresh brief, while the task runs — each answer counts as one of its turns — until it
chooses a task that makes it wait, stops, or nothing more can start before a running task
lands. Then the session ends; woken when every task it started has ended, the turn
completes with a record of what happened, and makes no model call then.

The wake rule (a task wakes when all its subtasks have ended) is why background tasks hang
under the turn that chose them: the coordinator, waiting on that one turn, starts the next
turn when they have all landed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from firm.brains.llm_loop import LoopSettings, SessionLoop
from firm.errors import FirmError
from firm.events import EventKind
from firm.teams.decision import Choices, Verdict, judge
from firm.teams.formats import FormatFallbackClient, mode_in_effect
from firm.teams.ledger import TeamState, read
from firm.teams.prompts import manager_system, turn_brief, worker_description
from firm.teams.review import REVIEW_KINDS, reviews_from
from firm.teams.spec import MAX_REPROMPTS, TeamSpec, task_id_of, worker_title

if TYPE_CHECKING:
    from firm.brains.llm import LLMBrain
    from firm.brains.protocol import Session
    from firm.tasks import Task
    from firm.tools.registry import ToolDef


def run_manager_turn(session: Session, spec: TeamSpec, llm: LLMBrain) -> None:
    children = session.subtasks
    if children and all(c.terminal for c in children):
        _complete(session, _record(session, spec, children))
        return
    assert spec.manager is not None
    try:
        settings = llm.settings_for(session.org, session.agent_id)
    except FirmError as exc:
        session.give_up(str(exc))
        return
    tree = session.subtree(session.task.root_id)
    reviews = {}
    if spec.reviewed:
        reviews = reviews_from(session.events_of([session.task.root_id], REVIEW_KINDS))
    state = read(spec, tree, reviews)
    mine = [t for t in state.turns if t.task.id == session.task_id]
    number = mine[0].number + sum(1 for t in mine if t.worker is not None) if mine else None
    tools = [t for t in session.tools() if not t.lifecycle]
    names = [t.model_name for t in tools]
    mode = mode_in_effect(session, spec, [t.task.id for t in state.turns])
    client = FormatFallbackClient(
        llm.client_for(settings.endpoint),
        mode=mode,
        system_for=lambda m: manager_system(spec, names, m),
        turn=number,
    )
    final: Verdict | None = None
    try:
        first = not children
        while state.choosable(spec) and (number is None or number <= spec.max_iter):
            client.turn = number
            # The first answer of a new turn reads the turn's brief, as written when the
            # coordinator started it; after that the brief is the team as it stands now.
            brief = None if first else turn_brief(spec, state, number or 0)
            verdict = _ask(session, spec, state, settings.loop, client, tools, number, brief)
            if session.ended:
                return
            if verdict is None:
                session.give_up("the manager ended its turn without a decision")
                return
            if verdict.kind != "execute":
                final = verdict
                break
            assert verdict.task_id is not None and verdict.agent_id is not None
            task = spec.task(verdict.task_id)
            following = number is None or number < spec.max_iter
            fresh = None
            if task.async_execution and following and not _after(spec, state, task.id):
                # Likely the last choice: looked at again as the run stands now (a task
                # that ended during the model call may have made another choosable).
                fresh = read(spec, session.subtree(session.task.root_id), reviews)
            last = (
                not task.async_execution
                or not following
                or (fresh is not None and not _after(spec, fresh, task.id))
            )
            with session.batch_delegations() as batch:
                result = session.call(
                    "delegate_task",
                    {
                        "assignee": verdict.agent_id,
                        "title": worker_title(task),
                        "description": worker_description(spec, task, state),
                    },
                )
                if result.ok and last:
                    # Nothing more to choose before a task lands: the turn ends with this
                    # delegation, in its transaction (firm/turnend.py), and the session
                    # reads and writes nothing more beside the report it starts.
                    batch.end_turn()
            if not result.ok:
                why = f"could not hand {task.id} to {verdict.agent_name}: {result.content}"
                session.give_up(why)
                return
            if session.ended:
                return
            if last:
                break  # the manager waits for what it started
            first = False
            number = None if number is None else number + 1
            state = read(spec, session.subtree(session.task.root_id), reviews)
    finally:
        client.close()
    _end_session(session, spec, final)


def _after(spec: TeamSpec, state: TeamState, task_id: str) -> list[str]:
    """What could be chosen next in `state` once task `task_id` runs."""
    chosen = state.tasks[task_id]
    was = chosen.status
    chosen.status = "running"
    try:
        return state.choosable(spec)
    finally:
        chosen.status = was


def _ask(
    session: Session,
    spec: TeamSpec,
    state: TeamState,
    loop_settings: LoopSettings,
    client: FormatFallbackClient,
    tools: list[ToolDef],
    number: int | None,
    brief: str | None,
) -> Verdict | None:
    """One decision: the LLM brain's loop, through a client that falls back to a weaker
    response format when the provider rejects the current one (and remembers it in the
    log), with each answer judged against the team as it stands."""
    assert spec.manager is not None
    choices = Choices(
        tasks={t: s.status for t, s in state.tasks.items()},
        members={m.id: m.name for m in spec.members},
        manager_id=spec.manager.id,
        manager_name=spec.manager.name,
        own_turn=session.task_id,
        failures={t: len(s.failures) for t, s in state.tasks.items()},
        waits_for={t.id: state.waits_for(t) for t in spec.tasks},
    )
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

    SessionLoop(
        session,
        loop_settings,
        client,
        system=manager_system(spec, [t.model_name for t in tools], client.mode),
        tools=tools,
        check_answer=check,
        brief=brief,
    ).run()
    return decided[-1] if decided else None


def _end_session(session: Session, spec: TeamSpec, final: Verdict | None) -> None:
    """Wait for the tasks this turn started, or, with none open, complete the turn."""
    children = [t for t in session.subtree(session.task_id) if t.parent_id == session.task_id]
    open_ones = [c for c in children if not c.terminal]
    if open_ones:
        if not session.delegated:
            # A session re-run after an interruption, with nothing new to start: re-issuing
            # a delegation returns the existing task, and the turn waits for it again.
            worker = open_ones[0]
            session.call(
                "delegate_task",
                {"assignee": worker.assignee, "title": worker.title,
                 "description": worker.description},
            )  # fmt: skip
        return
    if children:
        _complete(session, _record(session, spec, children, final))
    elif final is not None:
        _complete(session, final.record())
    else:
        session.give_up("the manager ended its turn without a decision")


def _record(
    session: Session, spec: TeamSpec, children: list[Task], final: Verdict | None = None
) -> dict[str, Any]:
    """What the turn did, as its result: one decision per task it started, then how it
    ended if not by starting one (a stop, a reselection) — from the log when the turn was
    woken, since that decision was made in an earlier session."""
    decisions: list[dict[str, Any]] = []
    for worker in children:
        task_id = task_id_of(worker.title)
        one: dict[str, Any] = {
            "action": "execute",
            "task_id": task_id,
            "agent_name": session.org.agent(worker.assignee).name,
            "worker_task": worker.id,
            "outcome": str(worker.status),
        }
        if any(t.id == task_id and t.async_execution for t in spec.tasks):
            one["async_execution"] = True
        decisions.append(one)
    ending = final.record() if final is not None else _ending_from_log(session)
    if ending is not None:
        decisions.append(ending)
    if len(decisions) == 1:
        return decisions[0]
    return {**decisions[-1], "decisions": decisions}


def _ending_from_log(session: Session) -> dict[str, Any] | None:
    """A stop or a reselection this turn logged as its last decision, if it did."""
    last = None
    for e in session.events_of([session.task_id], kinds=[EventKind.MANAGER_DECISION]):
        if e.data.get("verdict") != "rejected":
            last = e.data
    if last is None or last.get("verdict") not in ("stop", "reselected"):
        return None
    record: dict[str, Any] = {"action": last["verdict"]}
    for key in ("task_id", "agent_name"):
        if key in last:
            record[key] = last[key]
    if last.get("reason"):
        record["note"] = last["reason"]
    return record


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
    with session.owing():  # rides the delegation's write (or the next call's, the settle)
        session.log(EventKind.MANAGER_DECISION, data)
