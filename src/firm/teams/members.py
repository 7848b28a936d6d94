"""Agent and Task: what a team is made of, as its user writes it (mutable; a Task carries its
status and output between runs). firm.teams.build turns them into a TeamSpec."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from firm.teams.errors import TeamError

NOT_STARTED, DONE, FAILED = "not started", "done", "failed"


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
    done before it. async_execution: the task runs in the background — in a sequential team
    with the async tasks next to it, in a hierarchical one while the manager chooses the next
    task (docs/teams.md, Parallel tasks). human_input: a person accepts its output or sends
    it back with feedback (`firm questions`, `firm answer`; start() waits for the answer).
    After a run: `status` ("not started", "done",
    "failed") and `output`, the raw result. Set `status = "not started"` (or call reset())
    to have it run again.
    """

    def __init__(
        self,
        description: str,
        expected_output: str = "",
        agent: Agent | None = None,
        *,
        name: str | None = None,
        context: Iterable[Task | str] | None = None,
        async_execution: bool = False,
        human_input: bool = False,
    ):
        if not description or not description.strip():
            raise TeamError("a Task needs a description")
        self.description = description
        self.expected_output = expected_output
        self.agent = agent
        self.name = name
        self.context = None if context is None else list(context)
        if not isinstance(async_execution, bool):
            raise TeamError(f"async_execution must be True or False, not {async_execution!r}")
        self.async_execution = async_execution
        if not isinstance(human_input, bool):
            raise TeamError(f"human_input must be True or False, not {human_input!r}")
        self.human_input = human_input
        self.status = NOT_STARTED
        self.output: str | None = None
        self.firm_task_id: str | None = None

    def reset(self) -> None:
        self.status, self.output, self.firm_task_id = NOT_STARTED, None, None

    def __repr__(self) -> str:
        return f"Task(name={self.name!r}, status={self.status!r})"


def default_manager() -> Agent:
    """The manager a hierarchical team gets when it names none."""
    return Agent(
        name="Manager",
        role="Team manager",
        goal="Get every task of the team done well, choosing who does what and in what order.",
    )
