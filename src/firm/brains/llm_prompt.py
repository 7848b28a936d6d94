"""What the model is told: the system prompt of an agent, and its tools as function schemas.

The system prompt depends only on the org chart, the agent and its tools — never on the task,
the time or a counter — so every session of one agent starts with the same prefix and the
provider's prompt cache applies. The task arrives as the brief, in the first user message.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from firm.org import AgentSpec, OrgChart
from firm.tools.registry import ToolDef

# firm.testing's autopilot reads the reports back from this heading; keep the two in step.
REPORTS_HEADING = "Your direct reports (delegate to them by id):"
AGENT_ID_LABEL = "Your agent id:"


def _person(a: AgentSpec) -> str:
    return f"{a.name}, {a.title}"


def _first_line(text: str, limit: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def system_prompt(org: OrgChart, agent_id: str, tools: list[ToolDef]) -> str:
    """The stable system prompt of one agent."""
    me = org.agent(agent_id)
    manager = org.manager(agent_id)
    reports = org.reports(agent_id)
    names = {t.name for t in tools}
    parts = [f"You are {_person(me)} at {org.company}. {AGENT_ID_LABEL} {me.id}."]
    if org.description.strip():
        parts.append(f"About the company: {org.description.strip()}")
    if me.instructions.strip():
        parts.append(f"Your standing instructions: {me.instructions.strip()}")
    if manager is not None:
        parts.append(f"You report to {_person(manager)} ({manager.id}).")
    else:
        parts.append("You lead the company; your tasks come from the people who run it.")

    if reports:
        lines = [REPORTS_HEADING]
        for r in reports:
            line = f"- {r.id}: {_person(r)}"
            if r.instructions.strip():
                line += f" — {_first_line(r.instructions)}"
            lines.append(line)
        parts.append("\n".join(lines))

    how = [
        "How you work:",
        "- Each conversation is one session on one task; the task's brief is the first "
        "user message. Work only on that task.",
        "- Use your tools to do the work. Several tool calls in one reply are fine and save "
        "time; they run in order.",
    ]
    if "files.write" in names:
        how.append(
            "- Put your deliverable in the company workspace with files_write (paths are "
            f"relative, e.g. '{me.id}/plan.md') and list those files when you complete."
        )
    if reports:
        how += [
            "- To hand work to a report, call delegate_task once per subtask with a clear "
            "title and description. Delegate only to your direct reports above.",
            "- After delegating, end your turn: stop calling tools. You will be called again "
            "with their results once every subtask has finished; then merge them into your "
            "own deliverable and complete your task.",
        ]
    how += [
        "- Finish with complete_task (your result, and the files that hold it). If the task "
        "cannot be done, call fail_task with the reason.",
        "- A reply without tool calls ends your session, and its text becomes your result"
        + (
            " — unless you delegated in this session: then it just ends your turn."
            if reports
            else "."
        ),
        "- If a tool answers with an error, read it and call the tool again correctly.",
    ]
    parts.append("\n".join(how))
    parts.append("Your tools: " + ", ".join(t.model_name for t in tools) + ".")
    return "\n\n".join(parts)


# --- tool schemas --------------------------------------------------------------------------


def tool_specs(tools: list[ToolDef], *, strict: bool = False) -> list[dict[str, Any]]:
    """The tools as chat-completions function definitions, in a stable order.

    With strict=True, each tool whose arguments can be expressed in the providers' strict
    subset of JSON schema is marked strict; a tool with free-form object arguments (a dict
    of limits, say) stays non-strict rather than losing the argument.
    """
    specs = []
    for t in sorted(tools, key=lambda t: (not t.lifecycle, t.name)):
        schema = t.parameters_schema()
        function: dict[str, Any] = {
            "name": t.model_name,
            "description": t.description,
            "parameters": schema,
        }
        if strict:
            tight = strict_schema(schema)
            if tight is not None:
                function["parameters"] = tight
                function["strict"] = True
        specs.append({"type": "function", "function": function})
    return specs


class _NotStrict(Exception):
    pass


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The strict form of an object schema: every property required, optional ones nullable,
    no defaults, no open objects. None when the schema cannot be made strict."""
    try:
        return _tighten(copy.deepcopy(schema))
    except _NotStrict:
        return None


def _tighten(node: dict[str, Any]) -> dict[str, Any]:
    node.pop("default", None)
    if "$defs" in node:
        node["$defs"] = {k: _tighten(v) for k, v in node["$defs"].items()}
    if "anyOf" in node:
        node["anyOf"] = [_tighten(n) for n in node["anyOf"]]
    if node.get("type") == "array" and isinstance(node.get("items"), dict):
        node["items"] = _tighten(node["items"])
    if node.get("type") == "object" or "properties" in node:
        extra = node.get("additionalProperties", False)
        if extra is not False:
            raise _NotStrict
        props = node.get("properties", {})
        required = set(node.get("required", []))
        for name, prop in props.items():
            props[name] = _tighten(prop)
            if name not in required:
                props[name] = _nullable(props[name])
        node["required"] = list(props)
        node["additionalProperties"] = False
    return node


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    if "anyOf" in prop:
        if not any(p.get("type") == "null" for p in prop["anyOf"]):
            prop["anyOf"].append({"type": "null"})
        return prop
    kind = prop.get("type")
    if isinstance(kind, str) and kind != "null":
        prop["type"] = [kind, "null"]
        if "enum" in prop:
            prop["enum"] = [*prop["enum"], None]
        return prop
    if isinstance(kind, list):
        if "null" not in kind:
            prop["type"] = [*kind, "null"]
        return prop
    return {"anyOf": [prop, {"type": "null"}]}


def drop_null_optionals(tool: ToolDef | None, raw: str) -> str:
    """A null for an optional argument means 'not given' (strict schemas force models to send
    one): drop it so the tool's own default applies. Anything unparsable passes unchanged,
    for the checked path to explain."""
    if tool is None or "null" not in raw:
        return raw
    try:
        args = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, a huge integer, deep nesting
        return raw
    if not isinstance(args, dict):
        return raw
    required = set(tool.parameters_schema().get("required", []))
    kept = {k: v for k, v in args.items() if v is not None or k in required}
    return raw if len(kept) == len(args) else json.dumps(kept, ensure_ascii=False)
