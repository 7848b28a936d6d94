"""What the manager and the workers of a team are told. Pure text from the spec and state.

The manager's system prompt depends only on the team, so every turn starts with the same
prefix (providers cache it); the turn itself — the tasks, their results, this run's earlier
turns — is the brief. A worker's task carries the results of the tasks before it.
"""

from __future__ import annotations

import json

from firm.teams.decision import DECISION_SCHEMA
from firm.teams.ledger import TaskState, TeamState
from firm.teams.spec import MAX_RETRIES, MemberSpec, TaskSpec, TeamSpec

FEEDBACK_ROUNDS = 3  # the latest reviews that sent a task back, shown to its agent
CONTEXT_LIMIT = 8000  # characters of one earlier task's result given to a worker
SHOWN_RESULT = 1500  # characters of a done task's result shown to the manager


def _cut(text: str | None, limit: int) -> str:
    text = (text or "").strip()
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f" … [{len(text) - limit} more characters]"


def _member_line(m: MemberSpec) -> str:
    line = f"- {m.name} — {' '.join(m.role.split())}"
    if m.goal:
        line += f". Goal: {' '.join(m.goal.split())}"
    return line


def manager_system(spec: TeamSpec, tool_names: list[str], mode: str = "json_schema") -> str:
    """The manager's system prompt. When the provider does not enforce the schema (JSON mode
    or plain text), the schema itself is spelled out."""
    assert spec.manager is not None
    me = spec.manager
    role = " ".join(me.role.split())
    parts = [f"You are {me.name}, {role}: the manager of the team {spec.name}."]
    if me.goal:
        parts.append(f"Your goal: {me.goal.strip()}")
    if me.backstory:
        parts.append(me.backstory.strip())
    if me.instructions:
        parts.append(me.instructions.strip())
    parts.append("Your team:\n" + "\n".join(_member_line(m) for m in spec.members))
    parts.append(
        "How you work:\n"
        "- Each turn you choose ONE task from the task list and the ONE team member who "
        "should do it; that member then does it and you are shown the result in your next "
        "turn. You never do a task yourself.\n"
        "- A task that is done is never run again. A task that failed may be tried again "
        f"(at most {MAX_RETRIES} more times), by the same member or another.\n"
        + _background_rule(spec)
        + "- When every task is done, or nothing more can be done, choose stop.\n"
        "- Answer with one JSON object and nothing else, with exactly these keys:\n"
        '  {"task_id": "<id from the task list>", "agent_name": "<a team member\'s name>", '
        '"action": "execute"}\n'
        '  or, to end the team\'s work: {"task_id": "", "agent_name": "", "action": "stop"}'
    )
    if mode != "json_schema":
        parts.append(
            "Your answer must match this JSON schema — no other keys, and no text before or "
            "after the object:\n" + json.dumps(DECISION_SCHEMA, ensure_ascii=False)
        )
    if tool_names:
        parts.append(
            "You may use your tools to look into things before you decide: "
            + ", ".join(tool_names)
            + ". Then answer with the JSON object."
        )
    return "\n\n".join(parts)


def _background_rule(spec: TeamSpec) -> str:
    """Said only to the manager of a team with background tasks: other prompts stay as
    they were."""
    if not any(t.async_execution for t in spec.tasks):
        return ""
    return (
        "- A task that runs in the background does not make you wait: once you choose it, "
        "you choose the next task at once while it runs, and you see its result when it "
        "lands. A task that needs the result of one still running is chosen once that is "
        "in.\n"
    )


def _task_line(t: TaskSpec, state: TaskState, spec: TeamSpec, waits: list[str]) -> str:
    if state.running:
        status = "running" + (f": {spec.member(state.agent).name}" if state.agent else "")
    elif state.done:
        who = spec.member(state.agent).name if state.agent else None
        status = "done" + (f" by {who}" if who else "") + (" (earlier)" if state.carried else "")
    elif state.status == "excluded":
        why = "cancelled" if state.cancelled else f"failed {len(state.failures)} times"
        status = f"excluded: {why}"
    elif state.failures:
        status = f"failed {len(state.failures)} time(s), may be tried again"
    else:
        status = "not started"
    if waits and state.status == "pending":
        status += f", waits for {', '.join(waits)} (running)"
    lines = [f"- {t.id} [{status}]: {' '.join(t.description.split())}"]
    if t.expected_output:
        lines.append(f"  Expected output: {' '.join(t.expected_output.split())}")
    if t.agent and not state.done and not state.running:
        lines.append(f"  Meant for: {spec.member(t.agent).name}")
    if t.async_execution and not state.done and not state.running:
        lines.append("  Runs in the background: choosing it does not make you wait.")
    if state.done:
        lines.append("  Result: " + _cut(state.output, SHOWN_RESULT).replace("\n", "\n  "))
    elif state.failures:
        lines.append("  Last failure: " + _cut(state.failures[-1], 300))
    return "\n".join(lines)


def turn_brief(spec: TeamSpec, state: TeamState, number: int) -> str:
    """The description of manager turn `number`: the task list and this run's turns so far."""
    parts = [f"Turn {number} of at most {spec.max_iter}. Choose the next task and who does it."]
    lines = [_task_line(t, state.tasks[t.id], spec, state.waits_for(t)) for t in spec.tasks]
    parts.append("Tasks:\n" + "\n".join(lines))
    if state.turns:
        lines = []
        for turn in state.turns:
            trace = turn.trace()
            if trace["action"] == "execute":
                who = spec.member(turn.worker.assignee).name if turn.worker else "?"
                task, outcome = trace.get("task_id"), trace.get("outcome")
                if turn.worker is not None and not turn.worker.terminal:
                    outcome = "running"
                lines.append(f"- Turn {turn.number}: {task} → {who}: {outcome}")
            elif trace["action"] == "reselected":
                lines.append(f"- Turn {turn.number}: {trace.get('note')}")
            else:
                lines.append(f"- Turn {turn.number}: {trace['action']}")
        parts.append("Earlier turns of this run:\n" + "\n".join(lines))
    return "\n\n".join(parts)


def worker_description(spec: TeamSpec, task: TaskSpec, state: TeamState) -> str:
    """What the member doing `task` is given: the task, and the results it builds on."""
    parts = [task.description.strip()]
    if task.expected_output:
        parts.append(f"Expected output: {task.expected_output.strip()}")
    if task.context is not None:
        sources = [c for c in task.context if state.tasks[c].done]
    else:
        sources = [t.id for t in spec.tasks if t.id != task.id and state.tasks[t.id].done]
    if sources:
        blocks = []
        for tid in sources:
            s = state.tasks[tid]
            who = f" ({spec.member(s.agent).name})" if s.agent else ""
            blocks.append(f"### {tid}{who}\n\n{_cut(s.output, CONTEXT_LIMIT)}")
        parts.append("Context — the results of earlier tasks:\n\n" + "\n\n".join(blocks))
    own = state.tasks[task.id]
    for i, (output, feedback) in enumerate(own.feedback[-FEEDBACK_ROUNDS:], 1):
        parts.append(
            f"A person reviewed an earlier output of this task and sent it back ({i} of "
            f"{min(len(own.feedback), FEEDBACK_ROUNDS)}).\n\n### The earlier output\n\n"
            f"{_cut(output, CONTEXT_LIMIT)}\n\n### Their feedback\n\n{feedback}\n\n"
            "Do the task again, taking this feedback into account."
        )
    parts.append(
        "Your result is the deliverable and is handed on as it is: finish with complete_task "
        "and put the whole output in its result (or answer with the output itself), not a "
        "summary of it."
    )
    return "\n\n".join(parts)
