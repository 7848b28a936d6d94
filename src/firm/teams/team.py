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
import contextlib
import copy
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from firm.api import Firm
from firm.tasks import Task as FirmTask
from firm.teams.build import build_spec, task_id
from firm.teams.errors import TeamError, TeamFailed
from firm.teams.members import DONE, FAILED, Agent, Task
from firm.teams.run import (
    TeamResult,
    await_answers,
    cancel_leftovers,
    collect,
    finished_run,
    open_run,
    submit,
)
from firm.teams.spec import TeamSpec
from firm.teams.verbose import event_printer

__all__ = ["Agent", "Task", "Team", "TeamError", "TeamFailed"]

# Seconds after the engine starts that the store's statements are compiled ahead and the
# audit key loaded: a team's first model request leaves ~10-15 ms after start() (more on a
# loaded machine), and a model takes far longer than the rest of this to answer.
BACKGROUND_DELAY = 0.03


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

    def spec(self, inputs: dict[str, Any] | None = None) -> TeamSpec:
        """The team as firm stores it; raises TeamError for a mistake in the definition."""
        return build_spec(self, inputs)

    @classmethod
    def from_yaml(
        cls, path: str | Path, *, inputs: dict[str, Any] | None = None, **options: Any
    ) -> Team:
        """A team from a team file or a folder of agents.yaml and tasks.yaml (docs/teams.md);
        `options` are Team keyword arguments that override the file's."""
        from firm.teams.files import load_team

        return load_team(path, inputs=inputs, **options)

    # --- running ---------------------------------------------------------------------------

    def start(
        self,
        return_dict: bool = False,
        *,
        inputs: dict[str, Any] | None = None,
        fresh: bool = False,
    ) -> Any:
        """Run the tasks not done yet; returns the last task's raw output, or with
        return_dict=True every task's output by id with the manager's trace. Raises
        TeamFailed if the run ends with a task not done.

        A team already run to the end returns at once, with no model call: from memory, or
        — in a new process — from the store's latest finished run of the same definition
        and inputs. A run left unfinished (the process was killed) is continued, not redone.
        Tasks marked not started (task.reset(), team.reset()) run again in a new run.
        Outputs belong to the definition that produced them: after a change to the team or
        its inputs, every task runs again (unless the store holds a finished run of the new
        definition). fresh=True runs every task again in a new run,
        whatever the store holds."""
        spec = self.spec(inputs)
        changed = self._outputs_key is not None and self._outputs_key != spec.key()
        if fresh or changed:
            self.reset()
            spec = self.spec(inputs)
        if all(t.status == DONE for t in self.tasks):
            return self._from_memory(spec, return_dict)
        # The store's finished run stands for this one unless the user marked tasks of this
        # team to run again (after it ran here) or set some done by hand.
        reuse = not fresh and not spec.carried and (self._outputs_key is None or changed)
        with _opened(self.db, spec.reading_at_once) as firm:
            # The store's statements are compiled ahead (store/readied.py) and the audit key
            # loaded while the run's first model call is out, not beside the start, where
            # they took the writer's connection and the interpreter lock on its way.
            firm.store.background_delay = BACKGROUND_DELAY
            # A store made by this open holds no run to continue or to take the outputs of.
            look = not firm.store.created
            root_id = open_run(firm, spec) if look and not fresh else None
            finished = finished_run(firm, spec) if look and root_id is None and reuse else None
            if finished is not None:
                if self.verbose:
                    print(
                        f"[team] done earlier in {finished}; its outputs stand "
                        "(fresh=True runs it again)",
                        flush=True,
                    )
                self.run_id = finished
                return self._finish(collect(firm, finished), return_dict)
            unsubscribe = firm.store.subscribe(event_printer(spec)) if self.verbose else None
            submitted = root_id is None
            try:
                if root_id is None:
                    # Started at once: the run's commit claims its root (no claim round on
                    # the way to its first session).
                    root = submit(
                        firm, spec, workspace=self.workspace, llm=self.llm_options, start=True
                    )
                    root_id = root.id
                self.run_id = root_id
                firm.run_until(root_id)
                while await_answers(firm, root_id):  # human_input: a person reviews an output
                    firm.run_until(root_id)
            finally:
                if unsubscribe is not None:
                    unsubscribe()
            # Read beside the run's last write (its end's checkpoint, on the session's thread),
            # which stopping the engine waits for; the store's close then starts (off this
            # thread: _opened). The run's tree is read once, again only if a task was
            # cancelled; a run submitted here ran the spec it was submitted with.
            tree: list[FirmTask] | None = firm.subtree(root_id)
            if cancel_leftovers(firm, root_id, tree):
                tree = None
            outcome = collect(firm, root_id, spec=spec if submitted else None, tree=tree)
            firm.stop()
        return self._finish(outcome, return_dict)

    async def astart(
        self,
        return_dict: bool = False,
        *,
        inputs: dict[str, Any] | None = None,
        fresh: bool = False,
    ) -> Any:
        """start() without blocking the event loop (it runs in a worker thread)."""
        return await asyncio.to_thread(self.start, return_dict, inputs=inputs, fresh=fresh)

    def kickoff(self, inputs: dict[str, Any] | None = None) -> Any:
        """CrewAI's name for start(): placeholders like {topic} are filled from inputs."""
        return self.start(inputs=inputs)

    async def kickoff_async(self, inputs: dict[str, Any] | None = None) -> Any:
        return await self.astart(inputs=inputs)

    def reset(self, *tasks: Task | str) -> None:
        """Mark tasks (all, if none are named) not started, so the next start() runs them."""
        chosen = set(tasks)
        for i, t in enumerate(self.tasks):
            if not chosen or t in chosen or task_id(t, i) in chosen:
                t.reset()

    def _finish(self, outcome: TeamResult, return_dict: bool) -> Any:
        self._outputs_key = outcome.spec.key()
        ids = {task_id(t, i): t for i, t in enumerate(self.tasks)}
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
        last_run = self.result or {}
        if self.run_id is not None and last_run.get("run_id") == self.run_id:
            # The run that finished here: the same answer a new process reads from the store.
            return copy.deepcopy(last_run)
        ids = [t.id for t in spec.tasks]
        last = (self.result or {}).get("manager") or {}
        manager = {
            "status": "completed",
            "reason": None,
            "response_format": last.get("response_format", spec.manager_output),
            "turns": [],
        }
        return {
            "run_id": None,
            "status": "done",
            "error": None,
            "task_status": dict.fromkeys(ids, DONE),
            "task_results": {tid: t.output for tid, t in zip(ids, self.tasks, strict=True)},
            "manager": manager if spec.hierarchical else None,
        }


@contextlib.contextmanager
def _opened(db: str | Path | None, reading_at_once: int) -> Iterator[Firm]:
    """The store for one start(): closed on a thread once start() has read what it needs
    (its file's sync goes on beside the caller: Firm.close_soon), at once if start() fails."""
    firm = Firm(db, reading_at_once=reading_at_once)
    try:
        yield firm
    except BaseException:
        firm.close()
        raise
    firm.close_soon()
