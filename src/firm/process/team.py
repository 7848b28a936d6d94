"""Agent, Task, Team: a team of agents and a task list, for people coming from CrewAI and
PraisonAI — on firm's durable engine, so every task and every manager turn is a firm task
you can watch, cancel and resume.

    from firm import Agent, Task, Team

    researcher = Agent(name="researcher", role="Research topics")
    writer = Agent(name="writer", role="Write content")
    team = Team(
        agents=[researcher, writer],
        tasks=[Task(name="research", description="Research AI trends", agent=researcher),
               Task(name="write", description="Write an article on it", agent=writer)],
        process="hierarchical",
    )
    article = team.start()

See docs/teams.md.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from firm.api import Firm
from firm.errors import FirmError
from firm.org import LLMConfig
from firm.process.run import TeamResult, collect, open_run, submit
from firm.process.spec import (
    COORDINATOR,
    TASK_ID,
    MemberSpec,
    TaskSpec,
    TeamSpec,
    normalise_name,
    slug,
)
from firm.store.base import Event
from firm.tools.registry import ToolDef

PROCESSES = ("sequential", "hierarchical")
NOT_STARTED, DONE, FAILED = "not started", "done", "failed"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class TeamError(FirmError):
    """A team is defined wrongly; the message says what and where."""


class TeamFailed(FirmError):
    """A team run ended without every task done. `result` holds everything it produced, as
    `start(return_dict=True)` would have returned it; `reason` says why it ended."""

    def __init__(self, result: dict[str, Any]):
        self.result = result
        self.reason = result.get("error") or result.get("status")
        super().__init__(f"the team run {result.get('run_id')} {result['status']}: {self.reason}")


class Agent:
    """A member of a team. `name` is how the manager refers to it (defaults to `role`).

    llm: a model name, or a dict of llm settings (model, temperature, base_url, …).
    tools: firm tool names or globs ("files.read", "crm.*"), or functions decorated with
    @firm.tool. max_iter: model calls one of its sessions may make.
    `verbose` and `allow_delegation` are accepted and ignored: delegation is the process.
    """

    def __init__(
        self,
        name: str | None = None,
        role: str | None = None,
        goal: str = "",
        backstory: str = "",
        *,
        instructions: str = "",
        llm: str | dict[str, Any] | None = None,
        tools: Iterable[str | Callable[..., Any]] | None = None,
        max_iter: int | None = None,
        verbose: bool = False,
        allow_delegation: bool = False,
    ):
        if not (name or role):
            raise TeamError("an Agent needs a name or a role")
        self.name = (name or role or "").strip()
        self.role = (role or name or "").strip()
        self.goal = goal
        self.backstory = backstory
        self.instructions = instructions
        self.llm = llm
        self.tools = list(tools or [])
        self.max_iter = max_iter

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, role={self.role!r})"


class Task:
    """A task of a team. `name` is its id (defaults to task-1, task-2, … by position).

    agent: who does it (required in a sequential team; a suggestion in a hierarchical one).
    context: the tasks (or their names) whose results it is given; by default every task
    done before it. After a run: `status` ("not started", "done", "failed") and `output`,
    the raw result. Set `status = "not started"` (or call reset()) to have it run again.
    """

    def __init__(
        self,
        description: str,
        expected_output: str = "",
        agent: Agent | None = None,
        *,
        name: str | None = None,
        context: Iterable[Task | str] | None = None,
    ):
        if not description or not description.strip():
            raise TeamError("a Task needs a description")
        self.description = description
        self.expected_output = expected_output
        self.agent = agent
        self.name = name
        self.context = None if context is None else list(context)
        self.status = NOT_STARTED
        self.output: str | None = None
        self.firm_task_id: str | None = None

    def reset(self) -> None:
        self.status, self.output, self.firm_task_id = NOT_STARTED, None, None

    def __repr__(self) -> str:
        return f"Task(name={self.name!r}, status={self.status!r})"


DEFAULT_MANAGER = {
    "name": "Manager",
    "role": "Team manager",
    "goal": "Get every task of the team done well, choosing who does what and in what order.",
}


class Team:
    """Agents and a task list, run as a sequential or a hierarchical process.

    process: "sequential" (default: tasks in order, each given the results before it) or
    "hierarchical" (a manager chooses, turn by turn, the next task and who does it).
    llm: the model of every agent that names none (else FIRM_MODEL, else gpt-4o-mini).
    manager_llm / manager: the manager's model, or a whole Agent as the manager.
    max_iter: the manager's turns at most (default: 10, or twice the number of tasks).
    grant: tool names or globs the team hands its agents beyond the manager's own tools
    (default: every tool its agents declare). output="verbose" prints each manager decision.
    db, workspace: where the run is stored and where its agents' files go.
    """

    def __init__(
        self,
        agents: Iterable[Agent],
        tasks: Iterable[Task],
        *,
        process: str = "sequential",
        manager_llm: str | dict[str, Any] | None = None,
        manager: Agent | None = None,
        manager_agent: Agent | None = None,
        llm: str | dict[str, Any] | None = None,
        max_iter: int | None = None,
        grant: Iterable[str] | None = None,
        name: str | None = None,
        output: str | None = None,
        verbose: bool = False,
        db: str | Path | None = None,
        workspace: str | Path | None = None,
        manager_output: str = "json_schema",
        llm_options: dict[str, Any] | None = None,
        language: str | None = None,
        tool_modules: Iterable[str] | None = None,
    ):
        self.agents = list(agents)
        self.tasks = list(tasks)
        self.process = process
        self.manager = manager or manager_agent
        self.manager_llm = manager_llm
        self.llm = llm
        self.max_iter = max_iter
        self.grant = None if grant is None else list(grant)
        self.name = name or "Team"
        self.verbose = verbose or output == "verbose"
        self.db = db
        self.workspace = workspace
        self.manager_output = manager_output
        self.llm_options = dict(llm_options or {})
        self.language = language
        self.tool_modules = list(tool_modules or [])
        self.run_id: str | None = None
        self.result: dict[str, Any] | None = None
        self._outputs_key: str | None = None  # the definition the tasks' outputs came from
        self.spec()  # every mistake in the definition is reported now, not at start()

    @classmethod
    def from_yaml(
        cls, path: str | Path, *, inputs: dict[str, Any] | None = None, **options: Any
    ) -> Team:
        """A team from a team file or a folder of agents.yaml and tasks.yaml (docs/teams.md);
        `options` are Team keyword arguments that override the file's."""
        from firm.process.files import load_team

        return load_team(path, inputs=inputs, **options)

    # --- running ---------------------------------------------------------------------------

    def start(self, return_dict: bool = False, *, inputs: dict[str, Any] | None = None) -> Any:
        """Run the tasks not done yet; returns the last task's raw output, or with
        return_dict=True every task's output by id with the manager's trace. A team whose
        tasks are all done returns at once. Raises TeamFailed if the run ends with a task
        not done. A run left unfinished (the process was killed) is continued, not redone.
        Outputs belong to the definition that produced them: after a change to the team or
        its inputs, every task runs again."""
        spec = self.spec(inputs)
        if self._outputs_key is not None and self._outputs_key != spec.key():
            self.reset()
            spec = self.spec(inputs)
        if all(t.status == DONE for t in self.tasks):
            return self._from_memory(spec, return_dict)
        with Firm(self.db) as firm:
            root_id = open_run(firm, spec)
            if root_id is None:
                root_id = submit(firm, spec, workspace=self.workspace, llm=self.llm_options).id
            self.run_id = root_id
            unsubscribe = firm.store.subscribe(event_printer(spec)) if self.verbose else None
            try:
                firm.run_until(root_id)
            finally:
                if unsubscribe is not None:
                    unsubscribe()
            outcome = collect(firm, root_id)
        return self._finish(outcome, return_dict)

    async def astart(
        self, return_dict: bool = False, *, inputs: dict[str, Any] | None = None
    ) -> Any:
        """start() without blocking the event loop (it runs in a worker thread)."""
        return await asyncio.to_thread(self.start, return_dict, inputs=inputs)

    def kickoff(self, inputs: dict[str, Any] | None = None) -> Any:
        """CrewAI's name for start(): placeholders like {topic} are filled from inputs."""
        return self.start(inputs=inputs)

    async def kickoff_async(self, inputs: dict[str, Any] | None = None) -> Any:
        return await self.astart(inputs=inputs)

    def reset(self, *tasks: Task | str) -> None:
        """Mark tasks (all, if none are named) not started, so the next start() runs them."""
        chosen = set(tasks)
        for i, t in enumerate(self.tasks):
            if not chosen or t in chosen or self._task_id(t, i) in chosen:
                t.reset()

    def _finish(self, outcome: TeamResult, return_dict: bool) -> Any:
        self._outputs_key = outcome.spec.key()
        ids = {self._task_id(t, i): t for i, t in enumerate(self.tasks)}
        for tid, state in outcome.state.tasks.items():
            task = ids[tid]
            if state.done:
                task.status, task.output = DONE, state.output
                task.firm_task_id = state.firm_id or task.firm_task_id
            elif state.attempts:
                task.status, task.output, task.firm_task_id = FAILED, None, state.attempts[-1]
        self.result = outcome.as_dict()
        if not outcome.done:
            raise TeamFailed(self.result)
        return self.result if return_dict else outcome.last_output

    def _from_memory(self, spec: TeamSpec, return_dict: bool) -> Any:
        if not return_dict:
            return self.tasks[-1].output
        ids = [t.id for t in spec.tasks]
        manager = {"status": "completed", "reason": None, "turns": []}
        return {
            "run_id": None,
            "status": "done",
            "error": None,
            "task_status": dict.fromkeys(ids, DONE),
            "task_results": {tid: t.output for tid, t in zip(ids, self.tasks, strict=True)},
            "manager": manager if spec.hierarchical else None,
        }

    # --- the definition, checked -------------------------------------------------------------

    @staticmethod
    def _task_id(task: Task, index: int) -> str:
        return task.name.strip() if task.name else f"task-{index + 1}"

    def spec(self, inputs: dict[str, Any] | None = None) -> TeamSpec:
        """The team as firm stores it; raises TeamError for a mistake in the definition."""
        fill = _filler(inputs)
        if self.process not in PROCESSES:
            raise TeamError(f"process must be 'sequential' or 'hierarchical', not {self.process!r}")
        if not self.agents:
            raise TeamError("a team needs at least one agent")
        if not self.tasks:
            raise TeamError("a team needs at least one task")
        tool_modules = list(self.tool_modules)
        members = [
            _member(a, f"agents[{i}]", fill, tool_modules) for i, a in enumerate(self.agents)
        ]
        ids = {id(a): m.id for a, m in zip(self.agents, members, strict=True)}
        manager = None
        if self.process == "hierarchical":
            agent = self.manager or Agent(**DEFAULT_MANAGER)
            manager = _member(agent, "manager", fill, tool_modules)
            if self.manager_llm is not None:
                manager = manager.model_copy(
                    update={"llm": _merge_llm(manager.llm, _llm(self.manager_llm, "manager_llm"))}
                )
        _check_names([*members, *([manager] if manager else [])])

        task_ids = [self._task_id(t, i) for i, t in enumerate(self.tasks)]
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
        for i, (t, tid) in enumerate(zip(self.tasks, task_ids, strict=True)):
            where = f"tasks[{i}] ({tid})"
            agent_id = None
            if t.agent is not None:
                if id(t.agent) not in ids:
                    raise TeamError(f"{where}: its agent {t.agent.name!r} is not in the team")
                agent_id = ids[id(t.agent)]
            elif self.process == "sequential":
                raise TeamError(f"{where}: a sequential team needs an agent for every task")
            context = None
            if t.context is not None:
                context = []
                for c in t.context:
                    if isinstance(c, Task):
                        if c not in self.tasks:
                            raise TeamError(f"{where}: a task in its context is not in the team")
                        ref = self._task_id(c, self.tasks.index(c))
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
                )
            )
        carried = {
            tid: t.output
            for tid, t in zip(task_ids, self.tasks, strict=True)
            if t.status == DONE and t.output is not None
        }
        max_iter = self.max_iter if self.max_iter is not None else max(10, 2 * len(specs))
        if max_iter < 1:
            raise TeamError(f"max_iter must be at least 1, not {max_iter}")
        if self.manager_output not in ("json_schema", "json_object", "text"):
            raise TeamError(
                "manager_output must be 'json_schema', 'json_object' or 'text', "
                f"not {self.manager_output!r}"
            )
        try:
            spec = TeamSpec(
                name=fill(self.name, "name"),
                process=self.process,  # type: ignore[arg-type]
                members=members,
                tasks=specs,
                manager=manager,
                max_iter=max_iter,
                grant=self.grant,
                manager_output=self.manager_output,  # type: ignore[arg-type]
                llm=_llm(self.llm, "llm"),
                tool_modules=list(dict.fromkeys(tool_modules)),
                language=self.language,
                carried=carried,
            )
            spec.org_chart()  # the generated chart must itself be valid (tool patterns, …)
        except (ValidationError, FirmError) as exc:
            raise TeamError(f"the team is not valid: {exc}") from None
        return spec


# --- helpers -----------------------------------------------------------------------------------


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
        modules.append(_module_of(t))
    return names


def _module_of(fn: Callable[..., Any]) -> str:
    """How a resumed run finds a tool again: its module's name, or its file for a script."""
    name = getattr(fn, "__module__", "") or ""
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if name == "__main__" or not name:
        if path is None:
            raise TeamError(f"cannot tell where the tool {fn!r} is defined; put it in a module")
        return str(Path(path).resolve())
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


def event_printer(spec: TeamSpec, decisions_only: bool = False) -> Callable[[list[Event]], None]:
    """output="verbose": one line per manager decision (and per task start and end)."""
    names = {} if decisions_only else {m.id: m.name for m in spec.members}

    def show(events: list[Event]) -> None:
        for e in events:
            line = describe_event(e, names)
            if line:
                print(line, flush=True)

    return show


def describe_event(e: Event, names: dict[str, str]) -> str | None:
    d = e.data
    if e.kind == "manager_decision":
        turn = f"turn {d.get('turn')}"
        verdict = d.get("verdict")
        if verdict == "execute":
            return f"[manager] {turn}: {d.get('task_id')} → {d.get('agent_name')}"
        if verdict == "stop":
            return f"[manager] {turn}: stop"
        if verdict == "reselected":
            return f"[manager] {turn}: ignored — {d.get('reason')}"
        return f"[manager] {turn}: {d.get('reason')}"
    if e.agent in names and e.kind in ("started", "completed", "failed"):
        return f"[{names[e.agent]}] {e.kind} {e.task_id}"
    if e.kind == "team_task_excluded":
        return f"[team] {d.get('task_id')} is excluded after {d.get('failures')} failure(s)"
    if e.kind == "team_ended":
        return f"[team] {d.get('status')}" + (f": {d.get('reason')}" if d.get("reason") else "")
    return None
