"""Teams from YAML, in the style CrewAI users know: agents and tasks as mappings keyed by
name, with `{placeholders}` filled from inputs.

A team file holds the settings and either the agents and tasks themselves or the names of
the files that hold them (next to it):

    name: Content team
    process: hierarchical          # or sequential (the default)
    manager_llm: gpt-4o
    inputs: {topic: AI agents}
    agents: agents.yaml            # or a mapping, inline
    tasks: tasks.yaml

A folder works too: its team.yaml (optional), agents.yaml and tasks.yaml — the layout of a
CrewAI project's config folder. Every mistake is reported at once, with file, line and field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from firm.errors import OrgChartError, Problem, some_of
from firm.org import LLMConfig
from firm.teams.spec import TASK_ID, normalise_name
from firm.teams.team import Agent, Task, Team
from firm.yamlproblems import duplicate_keys, line_map, pydantic_problems
from firm.yamltext import load_plain

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
FILLED = ("role", "goal", "backstory", "instructions", "description", "expected_output")

# CrewAI settings that mean nothing here: accepted so a CrewAI file loads, and ignored.
IGNORED_AGENT_KEYS = frozenset(
    {
        "verbose", "allow_delegation", "cache", "memory", "max_rpm", "max_execution_time",
        "max_retry_limit", "respect_context_window", "allow_code_execution",
        "code_execution_mode", "multimodal", "reasoning", "max_reasoning_attempts",
        "inject_date", "date_format", "function_calling_llm", "system_template",
        "prompt_template", "response_template", "use_system_prompt", "step_callback",
        "knowledge_sources", "embedder",
    }
)  # fmt: skip
IGNORED_TASK_KEYS = frozenset(
    {
        "output_json", "output_pydantic", "output_file",
        "callback", "markdown", "create_directory", "guardrail", "tools", "config",
    }
)  # fmt: skip


class TeamFileError(OrgChartError):
    """A team file (or its agents or tasks file) is malformed; carries every problem found,
    each with file, line and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class AgentEntry(_Strict):
    role: Annotated[str, Field(min_length=1)]
    name: str | None = None
    goal: str = ""
    backstory: str = ""
    instructions: str = ""
    llm: str | LLMConfig | None = None
    tools: list[str] = Field(default_factory=list)
    max_iter: Annotated[int, Field(ge=1, le=1000)] | None = None


class TaskEntry(_Strict):
    description: Annotated[str, Field(min_length=1)]
    expected_output: str = ""
    agent: str | None = None
    context: list[str] | None = None
    async_execution: bool = False
    human_input: bool = False


class TeamEntry(_Strict):
    name: str | None = None
    process: Literal["sequential", "hierarchical"] = "sequential"
    llm: str | LLMConfig | None = None
    manager_llm: str | LLMConfig | None = None
    manager: AgentEntry | None = None
    max_iter: Annotated[int, Field(ge=1, le=10_000)] | None = None
    grant: list[str] | None = None
    manager_output: Literal["json_schema", "json_object", "text"] = "json_schema"
    language: str | None = None
    workspace: str | None = None
    tool_modules: list[str] = Field(default_factory=list)
    inputs: dict[str, str | int | float | bool] = Field(default_factory=dict)
    agents: Any  # a mapping of agents by name, or the name of a file holding one
    tasks: Any


@dataclass
class _Doc:
    """One YAML file: its data and where each path in it is."""

    file: str
    data: Any
    lines: dict[tuple[str | int, ...], int]

    def line(self, *path: str | int) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get(())

    def problem(self, path: tuple[str | int, ...], message: str) -> Problem:
        field = ".".join(str(p) for p in path)
        return Problem(self.file, self.line(*path), field, message)


def _read(path: Path) -> _Doc:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TeamFileError([Problem(str(path), None, "", "no such file")]) from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise TeamFileError([Problem(str(path), None, "", f"cannot read: {exc}")]) from None
    try:
        data, node = load_plain(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc)
        raise TeamFileError([Problem(str(path), line, "", f"not valid YAML: {reason}")]) from None
    dups = duplicate_keys(node, str(path))
    if dups:
        raise TeamFileError(dups)
    return _Doc(str(path), data, line_map(node))


def _mapping(doc: _Doc, what: str, path: tuple[str | int, ...] = ()) -> dict[str, Any]:
    data = doc.data
    for p in path:
        data = data[p]
    if not isinstance(data, dict) or not data:
        raise TeamFileError([doc.problem(path, f"expected a mapping of {what} by name")])
    return data


def load_team(path: str | Path, *, inputs: dict[str, Any] | None = None, **overrides: Any) -> Team:
    """A Team from a team file or a folder (see the module docstring). `inputs` fill the
    {placeholders}, over the file's own; `overrides` are Team keyword arguments."""
    p = Path(path)
    if p.is_dir():
        team_file = p / "team.yaml"
        if team_file.is_file():
            team_doc = _read(team_file)
        else:
            team_doc = _Doc(str(team_file), {"agents": "agents.yaml", "tasks": "tasks.yaml"}, {})
    else:
        team_doc = _read(p)
    if not isinstance(team_doc.data, dict):
        raise TeamFileError(
            [team_doc.problem((), "expected a mapping with 'agents:' and 'tasks:'")]
        )
    try:
        entry = TeamEntry.model_validate(team_doc.data)
    except ValidationError as err:
        raise TeamFileError(list(pydantic_problems(err, team_doc.file, team_doc.lines))) from None
    base = Path(team_doc.file).parent
    values = {**entry.inputs, **(inputs or {})}
    agents_doc, agents_path = _part(team_doc, entry.agents, "agents", base)
    tasks_doc, tasks_path = _part(team_doc, entry.tasks, "tasks", base)

    problems: list[Problem] = []
    agent_entries = _entries(agents_doc, agents_path, "agents", AgentEntry, problems)
    task_entries = _entries(tasks_doc, tasks_path, "tasks", TaskEntry, problems)
    manager_entry = entry.manager
    for key, a in agent_entries.items():
        _fill(a, values, agents_doc, (*agents_path, key), problems)
    for key, t in task_entries.items():
        _fill(t, values, tasks_doc, (*tasks_path, key), problems)
    if manager_entry is not None:
        _fill(manager_entry, values, team_doc, ("manager",), problems)
    if entry.name:
        entry.name = _fill_text(entry.name, values, team_doc, ("name",), problems)
    agent_keys = [str(k) for k in _mapping(agents_doc, "agents", agents_path)]
    _check_references(
        entry, agent_entries, agent_keys, task_entries, (agents_doc, agents_path),
        (tasks_doc, tasks_path), problems,
    )  # fmt: skip
    if problems:
        raise TeamFileError(problems)

    agents = {key: _agent(key, a) for key, a in agent_entries.items()}
    by_name = {normalise_name(key): a for key, a in agents.items()}
    tasks: dict[str, Task] = {}
    for key, t in task_entries.items():
        tasks[key] = Task(
            t.description,
            t.expected_output,
            by_name[normalise_name(t.agent)] if t.agent else None,
            name=key,
            context=t.context,
            async_execution=t.async_execution,
            human_input=t.human_input,
        )
    settings: dict[str, Any] = {
        "process": entry.process,
        "name": entry.name or Path(team_doc.file).stem,
        "llm": _llm(entry.llm),
        "manager_llm": _llm(entry.manager_llm),
        "manager": _agent(manager_entry.name or "Manager", manager_entry)
        if manager_entry
        else None,
        "max_iter": entry.max_iter,
        "grant": entry.grant,
        "manager_output": entry.manager_output,
        "language": entry.language,
        "workspace": str(base / entry.workspace) if entry.workspace else None,
        "tool_modules": [_module(m, base) for m in entry.tool_modules],
    }
    settings.update(overrides)
    return Team(list(agents.values()), list(tasks.values()), **settings)


def _part(team_doc: _Doc, value: Any, key: str, base: Path) -> tuple[_Doc, tuple[str | int, ...]]:
    """The document holding the agents (or tasks), and the path to them inside it."""
    if isinstance(value, str):
        return _read(base / value), ()
    if not isinstance(value, dict) or not value:
        raise TeamFileError(
            [
                team_doc.problem(
                    (key,), f"expected a mapping of {key} by name, or the name of a file"
                )
            ]
        )
    return team_doc, (key,)


def _entries(
    doc: _Doc,
    path: tuple[str | int, ...],
    what: str,
    model: type[AgentEntry] | type[TaskEntry],
    problems: list[Problem],
) -> dict[str, Any]:
    data = _mapping(doc, what, path)
    ignored = IGNORED_AGENT_KEYS if model is AgentEntry else IGNORED_TASK_KEYS
    out: dict[str, Any] = {}
    for key, value in data.items():
        where = (*path, key)
        if not isinstance(key, str) or not TASK_ID.match(key):
            problems.append(
                doc.problem(
                    where,
                    f"{key!r} is not usable as a name (letters, digits, '_', '-' and '.', "
                    "starting with a letter or digit)",
                )
            )
            continue
        if not isinstance(value, dict):
            problems.append(doc.problem(where, "expected a mapping of settings"))
            continue
        kept = {k: v for k, v in value.items() if k not in ignored}
        try:
            out[key] = model.model_validate(kept)
        except ValidationError as err:
            errors = err.errors()
            for e in errors:
                e["loc"] = (*where, *e["loc"])
            rebased: Any = _Rebased(errors)
            problems.extend(pydantic_problems(rebased, doc.file, doc.lines))
    return out


class _Rebased:
    """A ValidationError whose locations were rewritten to start at the entry's path."""

    def __init__(self, errors: list[Any]):
        self._errors = errors

    def errors(self) -> list[Any]:
        return self._errors


def _fill_text(
    text: str, values: dict[str, Any], doc: _Doc, where: tuple[str | int, ...], problems: list
) -> str:
    def one(m: re.Match[str]) -> str:
        key = m.group(1)
        if key in values:
            return str(values[key])
        given = ", ".join(sorted(values)) or "none"
        problems.append(
            doc.problem(
                where,
                f"the placeholder {{{key}}} has no value (inputs given: {given}); "
                f"add it under inputs: or pass --input {key}=...",
            )
        )
        return m.group(0)

    return _PLACEHOLDER.sub(one, text)


def _fill(
    entry: AgentEntry | TaskEntry,
    values: dict[str, Any],
    doc: _Doc,
    where: tuple[str | int, ...],
    problems: list[Problem],
) -> None:
    for name in FILLED:
        if hasattr(entry, name):
            text = getattr(entry, name)
            setattr(entry, name, _fill_text(text, values, doc, (*where, name), problems))


def _check_references(
    entry: TeamEntry,
    agents: dict[str, AgentEntry],
    agent_keys: list[str],
    tasks: dict[str, TaskEntry],
    agents_at: tuple[_Doc, tuple[str | int, ...]],
    tasks_at: tuple[_Doc, tuple[str | int, ...]],
    problems: list[Problem],
) -> None:
    agent_doc, agent_path = agents_at
    task_doc, task_path = tasks_at
    seen: dict[str, str] = {}
    for key, a in agents.items():
        name = normalise_name(a.name or key)
        if name in seen:
            problems.append(
                agent_doc.problem(
                    (*agent_path, key),
                    f"{key!r} and {seen[name]!r} cannot be told apart (names are compared "
                    "ignoring case, spacing and quotes)",
                )
            )
        seen[name] = key
    known_agents = {normalise_name(k): k for k in agent_keys}
    known_tasks = set(tasks)
    for key, t in tasks.items():
        where = (*task_path, key)
        if t.agent is not None and normalise_name(t.agent) not in known_agents:
            problems.append(
                task_doc.problem(
                    (*where, "agent"),
                    f"{t.agent!r} names no agent (known: {some_of(agent_keys)})",
                )
            )
        if t.agent is None and entry.process == "sequential":
            problems.append(
                task_doc.problem(where, "a sequential team needs an agent: for every task")
            )
        for ref in t.context or []:
            if ref not in known_tasks or ref == key:
                problems.append(
                    task_doc.problem(
                        (*where, "context"),
                        f"{ref!r} is not another task of the team (tasks: {', '.join(tasks)})",
                    )
                )


def _agent(key: str, a: AgentEntry) -> Agent:
    return Agent(
        name=a.name or key,
        role=a.role,
        goal=a.goal,
        backstory=a.backstory,
        instructions=a.instructions,
        llm=_llm(a.llm),
        tools=a.tools,
        max_iter=a.max_iter,
    )


def _llm(value: str | LLMConfig | None) -> str | dict[str, Any] | None:
    if isinstance(value, LLMConfig):
        return value.model_dump(exclude_none=True)
    return value


def _module(spec: str, base: Path) -> str:
    """Tool modules given as paths are kept absolute, so a resume elsewhere finds them."""
    if spec.endswith(".py") or "/" in spec or "\\" in spec:
        p = Path(spec)
        return str(p if p.is_absolute() else (base / p).resolve())
    return spec
