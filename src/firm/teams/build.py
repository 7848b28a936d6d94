"""From a Team as its user wrote it to the TeamSpec firm stores: every mistake reported with
where it is (agents[1], tasks[2] (write), …), placeholders filled, names checked so the
manager's answers can resolve them, models and tools resolved."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from firm.errors import FirmError
from firm.org import LLMConfig
from firm.teams.errors import TeamError
from firm.teams.members import DONE, Agent, Task, default_manager
from firm.teams.spec import (
    COORDINATOR,
    TASK_ID,
    MemberSpec,
    TaskSpec,
    TeamSpec,
    normalise_name,
    slug,
)
from firm.tools.registry import ToolDef

if TYPE_CHECKING:
    from firm.teams.team import Team

PROCESSES = ("sequential", "hierarchical")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def task_id(task: Task, index: int) -> str:
    """A task's id: its name, else its place in the list."""
    return task.name.strip() if task.name else f"task-{index + 1}"


def build_spec(team: Team, inputs: dict[str, Any] | None = None) -> TeamSpec:
    """The team as firm stores it; raises TeamError for a mistake in the definition."""
    fill = _filler(inputs)
    if team.process not in PROCESSES:
        raise TeamError(f"process must be 'sequential' or 'hierarchical', not {team.process!r}")
    if not team.agents:
        raise TeamError("a team needs at least one agent")
    if not team.tasks:
        raise TeamError("a team needs at least one task")
    tool_modules = list(team.tool_modules)
    members = [_member(a, f"agents[{i}]", fill, tool_modules) for i, a in enumerate(team.agents)]
    ids = {id(a): m.id for a, m in zip(team.agents, members, strict=True)}
    manager = None
    if team.process == "hierarchical":
        agent = team.manager or default_manager()
        manager = _member(agent, "manager", fill, tool_modules)
        if team.manager_llm is not None:
            manager = manager.model_copy(
                update={"llm": _merge_llm(manager.llm, _llm(team.manager_llm, "manager_llm"))}
            )
    _check_names([*members, *([manager] if manager else [])])

    task_ids = [task_id(t, i) for i, t in enumerate(team.tasks)]
    seen: dict[str, int] = {}
    for i, tid in enumerate(task_ids):
        where = f"tasks[{i}]"
        if not TASK_ID.match(tid):
            raise TeamError(
                f"{where}: the name {tid!r} is not usable as a task id (letters, digits, "
                "'_', '-' and '.', starting with a letter or digit, at most 64)"
            )
        key = normalise_name(tid)
        if key in seen:
            raise TeamError(f"{where}: the name {tid!r} is already used by tasks[{seen[key]}]")
        seen[key] = i
    specs = []
    for i, (t, tid) in enumerate(zip(team.tasks, task_ids, strict=True)):
        where = f"tasks[{i}] ({tid})"
        agent_id = None
        if t.agent is not None:
            if id(t.agent) not in ids:
                raise TeamError(f"{where}: its agent {t.agent.name!r} is not in the team")
            agent_id = ids[id(t.agent)]
        elif team.process == "sequential":
            raise TeamError(f"{where}: a sequential team needs an agent for every task")
        context = None
        if t.context is not None:
            context = []
            for c in t.context:
                if isinstance(c, Task):
                    if c not in team.tasks:
                        raise TeamError(f"{where}: a task in its context is not in the team")
                    ref = task_id(c, team.tasks.index(c))
                else:
                    ref = str(c)
                if ref not in task_ids:
                    raise TeamError(f"{where}: its context {ref!r} is not a task of the team")
                if ref == tid:
                    raise TeamError(f"{where}: a task cannot be its own context")
                context.append(ref)
        specs.append(
            TaskSpec(
                id=tid,
                description=fill(t.description, f"{where}.description"),
                expected_output=fill(t.expected_output, f"{where}.expected_output"),
                agent=agent_id,
                context=context,
                async_execution=t.async_execution,
                human_input=t.human_input,
            )
        )
    carried = {
        tid: t.output
        for tid, t in zip(task_ids, team.tasks, strict=True)
        if t.status == DONE and t.output is not None
    }
    max_iter = team.max_iter if team.max_iter is not None else max(10, 2 * len(specs))
    if max_iter < 1:
        raise TeamError(f"max_iter must be at least 1, not {max_iter}")
    if team.manager_output not in ("json_schema", "json_object", "text"):
        raise TeamError(
            "manager_output must be 'json_schema', 'json_object' or 'text', "
            f"not {team.manager_output!r}"
        )
    try:
        spec = TeamSpec(
            name=fill(team.name, "name"),
            process=team.process,  # type: ignore[arg-type]
            members=members,
            tasks=specs,
            manager=manager,
            max_iter=max_iter,
            grant=team.grant,
            manager_output=team.manager_output,  # type: ignore[arg-type]
            llm=_llm(team.llm, "llm"),
            tool_modules=list(dict.fromkeys(tool_modules)),
            language=team.language,
            carried=carried,
        )
        spec.org_chart()  # the generated chart must itself be valid (tool patterns, …)
    except (ValidationError, FirmError) as exc:
        raise TeamError(f"the team is not valid: {exc}") from None
    return spec


def _filler(inputs: dict[str, Any] | None) -> Callable[[str, str], str]:
    """Fill {placeholders} from inputs (only when inputs are given, as CrewAI does)."""
    if not inputs:
        return lambda text, where: text

    def fill(text: str, where: str) -> str:
        def one(m: re.Match[str]) -> str:
            key = m.group(1)
            if key not in inputs:
                raise TeamError(
                    f"{where}: the placeholder {{{key}}} has no value in the inputs "
                    f"(given: {', '.join(sorted(inputs))})"
                )
            return str(inputs[key])

        return _PLACEHOLDER.sub(one, text or "")

    return fill


def _llm(value: str | dict[str, Any] | None, where: str) -> LLMConfig | None:
    if value is None:
        return None
    try:
        if isinstance(value, str):
            return LLMConfig(model=_model_name(value))
        data = dict(value)
        if isinstance(data.get("model"), str):
            data["model"] = _model_name(data["model"])
        return LLMConfig(**data)
    except (ValidationError, TypeError) as exc:
        raise TeamError(f"{where}: not valid llm settings: {exc}") from None


def _model_name(model: str) -> str:
    """CrewAI spells OpenAI models "openai/gpt-4o"; the endpoint here is OpenAI-compatible,
    so the provider prefix is dropped."""
    return model[len("openai/") :] if model.startswith("openai/") else model


def _merge_llm(base: LLMConfig | None, override: LLMConfig | None) -> LLMConfig | None:
    if base is None:
        return override
    return base.merged(override)


def _tool_names(agent: Agent, where: str, modules: list[str]) -> list[str]:
    names = []
    for t in agent.tools:
        if isinstance(t, str):
            names.append(t)
            continue
        tool = getattr(t, "__firm_tool__", None)
        if not isinstance(tool, ToolDef):
            raise TeamError(
                f"{where}: {t!r} is not a firm tool; pass a tool name like 'files.read', "
                "or a function decorated with @firm.tool"
            )
        names.append(tool.name)
        modules.append(_module_of(t, tool.name, where))
    return names


def _module_of(fn: Callable[..., Any], tool: str, where: str) -> str:
    """How a run (and a resume, in another process) finds a tool again: by its module."""
    name = getattr(fn, "__module__", "") or ""
    if name in ("", "__main__") or sys.modules.get(name) is None:
        # Importing the script being run would run it again (and its team.start()).
        raise TeamError(
            f"{where}: the tool {tool!r} is defined in the script being run; firm imports a "
            "tool's module to run it and to resume it later, so put the tool in a module of "
            "its own (say tools.py) and import it from there"
        )
    return name


def _member(
    agent: Agent, where: str, fill: Callable[[str, str], str], modules: list[str]
) -> MemberSpec:
    if not isinstance(agent, Agent):
        raise TeamError(f"{where}: expected an Agent, not {type(agent).__name__}")
    name = fill(agent.name, f"{where}.name")
    ident = slug(name)
    if not ident:
        raise TeamError(f"{where}: the name {name!r} has no letters or digits to make an id from")
    if ident == COORDINATOR:
        raise TeamError(f"{where}: the name {name!r} is taken by the team's coordinator")
    llm = _llm(agent.llm, f"{where}.llm")
    if agent.max_iter is not None:
        llm = _merge_llm(llm, _llm({"max_iterations": agent.max_iter}, f"{where}.max_iter"))
    return MemberSpec(
        id=ident,
        name=name,
        role=fill(agent.role, f"{where}.role"),
        goal=fill(agent.goal, f"{where}.goal"),
        backstory=fill(agent.backstory, f"{where}.backstory"),
        instructions=fill(agent.instructions, f"{where}.instructions"),
        llm=llm,
        tools=_tool_names(agent, where, modules),
    )


def _check_names(members: list[MemberSpec]) -> None:
    """Names must stay apart once compared the way the manager's answers are."""
    seen: dict[str, str] = {}
    for m in members:
        for key in {normalise_name(m.name), m.id}:
            if key in seen:
                raise TeamError(
                    f"the agents {seen[key]!r} and {m.name!r} cannot be told apart "
                    "(names are compared ignoring case, spacing and quotes)"
                )
        seen.update(dict.fromkeys({normalise_name(m.name), m.id}, m.name))
