"""A team as pure data: who is in it, its task list, how it is run — and the org chart it
becomes. Stored with the run (as the team brain's options), so `firm resume` rebuilds the
team from the database alone. No I/O.

The chart a team becomes:

    coordinator                  deterministic: drives the process, never calls a model
    └── manager                  hierarchical only: one model call (or a few) per turn
        ├── researcher           the team's agents, each an LLM-brain agent
        └── writer

In a sequential team the agents report to the coordinator directly. Authority follows the
chart like in any company: an agent's grant is derived from its delegator's, so a worker of
a hierarchical team holds at most what the manager's grant covers — the manager's own
`tools` plus the team's `grant` (its `can_grant`).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from functools import lru_cache
from typing import Annotated, Any, Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from firm.events import EventKind
from firm.org import LLMConfig, OrgChart, parse_org

BRAIN_NAME = "team"  # the brain a team's run is stored with
COORDINATOR = "coordinator"
DEFAULT_MODEL = "gpt-4o-mini"  # when neither llm=, the team's llm nor FIRM_MODEL names one
MAX_REPROMPTS = 3  # invalid manager answers sent back in a row; the next one ends the run
MAX_RETRIES = 3  # re-delegations of a failed task; after the next failure it is excluded
TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
TITLE_LIMIT = 200
MAX_CONCURRENT = 32  # sessions of one team's run at once, however many tasks run in parallel

Process = Literal["sequential", "hierarchical"]
ManagerOutput = Literal["json_schema", "json_object", "text"]
MANAGER_OUTPUTS = ("json_schema", "json_object", "text")  # strictest first (formats.py)
DOWNGRADED = EventKind.MANAGER_OUTPUT_DOWNGRADED  # a response format the API refused
# libyaml's emitter when PyYAML has it: the chart is written a few times per start().
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MemberSpec(_Frozen):
    """One agent of the team: a worker, or the manager."""

    id: str  # the agent id in the chart (a slug of the name)
    name: str  # what the manager calls it by
    role: str
    goal: str = ""
    backstory: str = ""
    instructions: str = ""
    llm: LLMConfig | None = None
    tools: list[str] = Field(default_factory=list)


class TaskSpec(_Frozen):
    id: str
    description: str
    expected_output: str = ""
    agent: str | None = None  # a member id: who does it (sequential), a suggestion (hierarchical)
    context: list[str] | None = None  # task ids whose results it is given; None: all done so far
    async_execution: bool = False  # runs in the background (docs/teams.md, Parallel tasks)
    human_input: bool = False  # a person accepts its output, or sends it back with feedback


class TeamSpec(_Frozen):
    name: str = "Team"
    process: Process = "sequential"
    members: list[MemberSpec]
    tasks: list[TaskSpec]
    manager: MemberSpec | None = None
    max_iter: Annotated[int, Field(ge=1, le=10_000)] = 10
    grant: list[str] | None = None  # None: what the team's agents declare
    manager_output: ManagerOutput = "json_schema"
    llm: LLMConfig | None = None
    tool_modules: list[str] = Field(default_factory=list)
    language: str | None = None
    carried: dict[str, str] = Field(default_factory=dict)  # task id -> output of an earlier start
    # The chart's text, made once (~0.7 ms): a start checks it as it builds the spec, then
    # submits the run with it. The spec is frozen, so the text stands.
    _chart_text: str | None = PrivateAttr(default=None)

    # --- questions ---------------------------------------------------------------------------

    @property
    def hierarchical(self) -> bool:
        return self.process == "hierarchical"

    @property
    def reading_at_once(self) -> int:
        """The most of a run's sessions that start, and so read the store, at once: a
        manager's turn goes on beside the task it has just started; a sequential run hands
        out consecutive background tasks in one commit. The rest of the time a model call
        keeps them apart (a run of 3 background tasks never read on more than two at once)."""
        if self.hierarchical:
            return 2
        longest = together = 0
        for t in self.tasks:
            together = together + 1 if t.async_execution else 0
            longest = max(longest, together)
        return max(2, longest)

    @property
    def reviewed(self) -> bool:
        """Whether a person reviews some task's output (human_input): only then can the log
        hold reviews, and only then is it read for them."""
        return any(t.human_input for t in self.tasks)

    def task(self, task_id: str) -> TaskSpec:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise KeyError(task_id)

    def member(self, member_id: str) -> MemberSpec:
        for m in self.members:
            if m.id == member_id:
                return m
        if self.manager is not None and self.manager.id == member_id:
            return self.manager
        raise KeyError(member_id)

    def key(self) -> str:
        """What identifies the team's definition: the same agents, tasks and settings give the
        same key, so a run left unfinished by a killed process is found and continued."""
        definition = self.model_dump(mode="json", exclude={"carried"})
        for task in definition["tasks"]:
            for unset in ("async_execution", "human_input"):
                if not task[unset]:
                    del task[unset]  # so a definition keeps the key it had before
        text = json.dumps(definition, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def team_grant(self) -> list[str]:
        """What the manager (or, in a sequential team, the coordinator) may hand down beyond
        its own tools: `grant` if set, else every tool the team's agents declare."""
        if self.grant is not None:
            return list(self.grant)
        declared = [p for m in self.members for p in m.tools]
        if self.manager is not None:
            declared += self.manager.tools
        return list(dict.fromkeys(declared))

    # --- the org chart -----------------------------------------------------------------------

    def org_chart(self) -> OrgChart:
        return _parsed(self.org_yaml(), f"<team {self.name}>")

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copy = super().model_copy(update=update, deep=deep)
        if update:  # another team: its chart is made anew
            copy._chart_text = None
        return copy

    def org_yaml(self) -> str:
        if self._chart_text is None:
            self._chart_text = _chart_of(self)
        return self._chart_text

    def _make_org_yaml(self) -> str:
        grant = self.team_grant()
        agents: list[dict[str, Any]] = []
        boss = COORDINATOR
        coordinator_grant = grant
        if self.hierarchical:
            assert self.manager is not None
            boss = self.manager.id
            coordinator_grant = list(dict.fromkeys([*self.manager.tools, *grant]))
        agents.append(
            {
                "id": COORDINATOR,
                "name": "Coordinator",
                "title": "Team coordinator",
                "instructions": f"Runs the {self.process} process of the team {self.name}.",
                "tools": [],
                "can_grant": coordinator_grant,
                # It asks a person to review the output of human_input tasks.
                **({"ask_human": True} if self.reviewed else {}),
            }
        )
        if self.manager is not None and self.hierarchical:
            agents.append(_chart_agent(self.manager, COORDINATOR, can_grant=grant))
        agents += [_chart_agent(m, boss) for m in self.members]
        chart: dict[str, Any] = {
            "company": self.name[:TITLE_LIMIT],
            "description": f"A {self.process} team of {len(self.members)} agent(s) "
            f"with {len(self.tasks)} task(s).",
            # Room for the background tasks beside the manager's turn (or a sequential run).
            "max_concurrent": min(MAX_CONCURRENT, 2 + sum(t.async_execution for t in self.tasks)),
            "default_tools": [],
            "tool_modules": list(self.tool_modules),
        }
        if self.llm is not None:
            chart["llm"] = self.llm.model_dump(exclude_none=True)
        chart["agents"] = agents
        return yaml.dump(chart, Dumper=_DUMPER, sort_keys=False, allow_unicode=True)


_CHARTS: OrderedDict[str, str] = OrderedDict()  # a definition's JSON -> its chart's text
_CHARTS_KEPT = 16
_charts_lock = threading.Lock()


def _chart_of(spec: TeamSpec) -> str:
    """The chart's text, made once per definition in a process: every start() builds a new
    spec, and the YAML dump (~0.45 ms) was on each run's way to its first model call. The
    chart is made from the definition alone (not from outputs carried from earlier starts),
    and the whole definition is the key, so the text is the one `_make_org_yaml` would give."""
    key = json.dumps(spec.model_dump(mode="json", exclude={"carried"}), sort_keys=True)
    with _charts_lock:
        text = _CHARTS.get(key)
        if text is not None:
            _CHARTS.move_to_end(key)
            return text
    text = spec._make_org_yaml()
    with _charts_lock:
        _CHARTS[key] = text
        while len(_CHARTS) > _CHARTS_KEPT:
            _CHARTS.popitem(last=False)
    return text


@lru_cache(maxsize=16)
def _parsed(text: str, source: str) -> OrgChart:
    """A team's chart parsed once per text: a start checks it as it builds the team, then
    submits the run with it (a parse is ~2.5 ms on each start's path). OrgChart is frozen."""
    return parse_org(text, source)


def _chart_agent(m: MemberSpec, reports_to: str, can_grant: list[str] | None = None) -> dict:
    parts = []
    if len(m.role) > TITLE_LIMIT:
        parts.append(f"Role: {m.role}")
    if m.goal:
        parts.append(f"Goal: {m.goal}")
    if m.backstory:
        parts.append(f"Backstory: {m.backstory}")
    if m.instructions:
        parts.append(m.instructions)
    entry: dict[str, Any] = {
        "id": m.id,
        "name": m.name[:TITLE_LIMIT],
        "title": _one_line(m.role, TITLE_LIMIT),
        "reports_to": reports_to,
        "instructions": "\n\n".join(parts)[:20_000],
        "tools": list(m.tools),
        "can_grant": list(can_grant or []),
    }
    if m.llm is not None:
        entry["llm"] = m.llm.model_dump(exclude_none=True)
    return entry


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


# --- names -----------------------------------------------------------------------------------

_QUOTES = "\"'`“”‘’«»„"
_QUOTE_TABLE = str.maketrans("", "", _QUOTES)


def normalise_name(text: str) -> str:
    """How names and task ids are compared: quotes removed, whitespace collapsed, case
    folded. Two names are the same only if these forms are equal; nothing is guessed."""
    return " ".join(str(text).translate(_QUOTE_TABLE).split()).casefold()


def slug(name: str) -> str:
    """An agent id for the chart from a display name."""
    s = re.sub(r"[^a-z0-9_-]+", "-", name.casefold()).strip("-_")
    return s[:63].rstrip("-_")


def first_line(text: str, limit: int = 120) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return _one_line(line, limit)
    return ""


def worker_title(task: TaskSpec) -> str:
    """The title of a team task's firm task: its id first, so the id can be read back."""
    head = first_line(task.description, TITLE_LIMIT - len(task.id) - 2)
    return f"{task.id}: {head}" if head else task.id


def task_id_of(title: str) -> str:
    return title.split(": ", 1)[0]


def turn_title(number: int) -> str:
    return f"Manager turn {number}"
