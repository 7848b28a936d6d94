"""The manager's decision: the JSON it must answer with, and the judgement of an answer.

Pure: `judge` takes the answer text and what the team looks like right now and returns a
verdict — execute, stop, reselected (a task already done: logged and ignored), or rejected
with a message that names what was wrong and lists the valid choices.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from firm.teams.spec import normalise_name

DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task_id": {
            "type": "string",
            "description": "The id of the team task to run next (empty when stopping).",
        },
        "agent_name": {
            "type": "string",
            "description": "The name of the team member who should do it (empty when stopping).",
        },
        "action": {
            "type": "string",
            "enum": ["execute", "stop"],
            "description": "execute: run the task now; stop: end the team's work.",
        },
    },
    "required": ["task_id", "agent_name", "action"],
    "additionalProperties": False,
}


def response_format(mode: str) -> dict[str, Any] | None:
    """The chat-completions response_format for a manager turn."""
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": "manager_decision", "strict": True, "schema": DECISION_SCHEMA},
        }
    if mode == "json_object":
        return {"type": "json_object"}
    return None  # "text": the prompt alone asks for JSON


Kind = Literal["execute", "stop", "reselected", "rejected"]


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    task_id: str | None = None  # the team task, as the team spells its id
    agent_id: str | None = None  # the member chosen, by chart id
    agent_name: str | None = None  # ... and by name
    reason: str = ""  # for rejected and reselected: what the manager is told

    @property
    def accepted(self) -> bool:
        return self.kind != "rejected"

    def record(self) -> dict[str, Any]:
        data: dict[str, Any] = {"action": self.kind}
        if self.task_id is not None:
            data["task_id"] = self.task_id
        if self.agent_name is not None:
            data["agent_name"] = self.agent_name
        if self.reason:
            data["note"] = self.reason
        return data


@dataclass(frozen=True)
class Choices:
    """What the manager may answer with, this turn."""

    tasks: dict[str, str]  # task id -> "pending" | "running" | "done" | "excluded"
    members: dict[str, str]  # member id -> name
    manager_id: str
    manager_name: str
    own_turn: str  # the firm id of this manager turn
    failures: dict[str, int]  # task id -> failed attempts
    waits_for: dict[str, list[str]] = field(default_factory=dict)  # task id -> running inputs

    def open_tasks(self) -> list[str]:
        return [t for t, s in self.tasks.items() if s == "pending" and not self.waits_for.get(t)]

    def valid_lists(self) -> str:
        tasks = ", ".join(self.open_tasks()) or "none left"
        names = ", ".join(self.members.values())
        return f"Tasks you can choose: {tasks}. Team members: {names}."


KEYS = ("task_id", "agent_name", "action")


def parse_answer(text: str) -> dict[str, Any] | str:
    """The JSON object an answer is, or a message saying why it is not one. The answer must
    be the object alone, as the schema asks; the one thing tolerated is a Markdown code fence
    around it (```json … ```), which models answering in plain text often add."""
    body = _unfenced(text.strip())
    alone = "your answer must be the JSON object alone, with no text around it"
    if not body.startswith("{"):
        return alone if "{" in body else "your answer is not a JSON object"
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            return alone
        return f"your answer is not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(data, dict):
        return "your answer is not a JSON object"
    missing = [k for k in KEYS if k not in data]
    if missing:
        return f"your answer lacks {', '.join(repr(k) for k in missing)}"
    extra = [k for k in data if k not in KEYS]
    if extra:
        return (
            f"your answer has {', '.join(repr(k) for k in extra)}, which the schema does not "
            "allow; use exactly the keys task_id, agent_name and action"
        )
    for key in KEYS:
        value = data[key]
        scalar = value is None or isinstance(value, str | int | float)
        if isinstance(value, bool) or not scalar:
            return f"{key!r} must be a string"
    return data


def _unfenced(body: str) -> str:
    """The text inside a code fence that wraps the whole answer; else the answer itself."""
    if not (body.startswith("```") and body.endswith("```") and len(body) >= 6):
        return body
    inner = body[3:-3].strip()
    if inner[:4].casefold() == "json" and (inner[4:5] == "{" or inner[4:5].isspace()):
        inner = inner[4:]  # the fence's language tag
    return inner.strip()


def judge(text: str, choices: Choices) -> Verdict:
    """Decide what an answer means. Task ids and agent names are compared after
    normalise_name, then must be equal."""
    data = parse_answer(text)
    if isinstance(data, str):
        return _reject(f"{data}. {_FORMAT}", choices)
    action = normalise_name(str(data["action"] or ""))
    if action == "stop":
        return Verdict("stop")
    if action != "execute":
        return _reject(f'\'action\' must be "execute" or "stop", not {data["action"]!r}', choices)

    wanted_task = normalise_name(str(data["task_id"] if data["task_id"] is not None else ""))
    if wanted_task == normalise_name(choices.own_turn):
        return _reject(
            f"{choices.own_turn} is your own turn, not a team task; choose a task to run",
            choices,
        )
    task_id = next((t for t in choices.tasks if normalise_name(t) == wanted_task), None)
    if task_id is None:
        return _reject(f"there is no task {data['task_id']!r}", choices)

    wanted_agent = normalise_name(str(data["agent_name"] or ""))
    if wanted_agent == normalise_name(choices.manager_name):
        return _reject(
            "you are the manager and cannot do a task yourself; choose a team member", choices
        )
    # Members are chosen by name only (not by their id in the generated chart).
    agent_id = next(
        (mid for mid, name in choices.members.items() if normalise_name(name) == wanted_agent),
        None,
    )
    if agent_id is None:
        return _reject(f"there is no team member {data['agent_name']!r}", choices)
    name = choices.members[agent_id]

    state = choices.tasks[task_id]
    if state == "done":
        note = f"{task_id} is already done; it was not run again"
        return Verdict("reselected", task_id, agent_id, name, note)
    if state == "excluded":
        failed = choices.failures.get(task_id, 0)
        return _reject(
            f"task {task_id} is excluded (it failed {failed} times or was cancelled)", choices
        )
    if state == "running":
        return _reject(
            f"task {task_id} is running in the background; its result comes when it lands",
            choices,
        )
    waits = choices.waits_for.get(task_id)
    if waits:
        return _reject(
            f"task {task_id} needs the result of {', '.join(waits)}, still running; choose it "
            "once that is in",
            choices,
        )
    return Verdict("execute", task_id, agent_id, name)


_FORMAT = (
    'Answer with one JSON object: {"task_id": "...", "agent_name": "...", "action": "execute"}, '
    'or {"task_id": "", "agent_name": "", "action": "stop"}'
)


def _reject(what: str, choices: Choices) -> Verdict:
    return Verdict("rejected", reason=f"Rejected: {what}. {choices.valid_lists()}")
