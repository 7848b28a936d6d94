"""The manager's decision: the JSON it must answer with, and the judgement of an answer.

Pure: `judge` takes the answer text and what the team looks like right now and returns a
verdict — execute, stop, reselected (a task already done: logged and ignored), or rejected
with a message that names what was wrong and lists the valid choices.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from firm.process.spec import normalise_name

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

    tasks: dict[str, str]  # task id -> "pending" | "done" | "excluded"
    members: dict[str, str]  # member id -> name
    manager_id: str
    manager_name: str
    own_turn: str  # the firm id of this manager turn
    failures: dict[str, int]  # task id -> failed attempts

    def open_tasks(self) -> list[str]:
        return [t for t, s in self.tasks.items() if s == "pending"]

    def valid_lists(self) -> str:
        tasks = ", ".join(self.open_tasks()) or "none left"
        names = ", ".join(self.members.values())
        return f"Tasks you can choose: {tasks}. Team members: {names}."


def parse_answer(text: str) -> dict[str, Any] | str:
    """The JSON object in an answer, or a message saying why there is none. Code fences and
    text around the object are tolerated; the object itself must be valid JSON."""
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`")
        if body[:4].lower() == "json":
            body = body[4:]
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        return "your answer is not a JSON object"
    try:
        data = json.loads(body[start : end + 1])
    except json.JSONDecodeError as exc:
        return f"your answer is not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(data, dict):
        return "your answer is not a JSON object"
    missing = [k for k in ("task_id", "agent_name", "action") if k not in data]
    if missing:
        return f"your answer lacks {', '.join(repr(k) for k in missing)}"
    for key in ("task_id", "agent_name", "action"):
        value = data[key]
        scalar = value is None or isinstance(value, str | int | float)
        if isinstance(value, bool) or not scalar:
            return f"{key!r} must be a string"
    return data


def judge(text: str, choices: Choices) -> Verdict:
    """Decide what an answer means. Names and ids are compared after normalise_name."""
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
    if wanted_agent in (normalise_name(choices.manager_name), normalise_name(choices.manager_id)):
        return _reject(
            "you are the manager and cannot do a task yourself; choose a team member", choices
        )
    agent_id = next(
        (
            mid
            for mid, name in choices.members.items()
            if wanted_agent in (normalise_name(name), normalise_name(mid))
        ),
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
    return Verdict("execute", task_id, agent_id, name)


_FORMAT = (
    'Answer with one JSON object: {"task_id": "...", "agent_name": "...", "action": "execute"}, '
    'or {"task_id": "", "agent_name": "", "action": "stop"}'
)


def _reject(what: str, choices: Choices) -> Verdict:
    return Verdict("rejected", reason=f"Rejected: {what}. {choices.valid_lists()}")
