"""What the API accepts and returns. These models are the OpenAPI schema at /docs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from firm.tasks import Task

StatusName = Literal["todo", "in_progress", "waiting", "done", "failed", "cancelled"]
PriorityName = Literal["low", "normal", "high", "urgent"]

AGENT_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
LANGUAGE_PATTERN = r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$"


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NewGoal(_Request):
    """A goal for the company, given to the top of the org chart or to the agent named."""

    goal: str = Field(
        min_length=1,
        max_length=20_000,
        pattern=r"\S",
        description="What the company should do; the first line becomes the task's title.",
        examples=["Launch an AI note-taking app"],
    )
    to: str | None = Field(
        None,
        pattern=AGENT_ID_PATTERN,
        description="The agent the goal goes to [default: the top of the org chart].",
    )
    priority: PriorityName = "normal"
    language: str | None = Field(
        None,
        pattern=LANGUAGE_PATTERN,
        description="Language code for the work [default: detected from the goal].",
        examples=["fr"],
    )


# Up to this many agents, the schema lists them by name (so /docs offers them to pick from).
AGENTS_IN_SCHEMA = 500


def goal_model(agent_ids: list[str]) -> type[NewGoal]:
    """NewGoal with `to` narrowed to the agents of one org chart."""
    if not agent_ids or len(agent_ids) > AGENTS_IN_SCHEMA:
        return NewGoal
    agent = Literal[tuple(agent_ids)]  # type: ignore[valid-type]
    return create_model(
        "NewGoal",
        __base__=NewGoal,
        __doc__=NewGoal.__doc__,
        to=(  # type: ignore[arg-type]  # a Literal made at run time, which mypy cannot follow
            agent | None,
            Field(None, description="The agent the goal goes to [default: the top of the chart]."),
        ),
    )


class CancelRequest(_Request):
    reason: str = Field(
        default="cancelled from the office",
        min_length=1,
        max_length=2000,
        description="Why; the manager above the task sees it.",
    )


class TaskOut(BaseModel):
    """A task: one agent's piece of work, with its result, files or failure reason."""

    id: str
    root_id: str = Field(description="The id of the goal (root task) this task serves.")
    parent_id: str | None
    title: str
    description: str
    status: StatusName
    assignee: str
    created_by: str = Field(description="The agent who delegated it, or 'user'.")
    priority: PriorityName
    language: str
    result: str | None
    files: list[str] = Field(description="Workspace paths of the deliverable.")
    error: str | None = Field(description="Why it failed or was cancelled.")
    created_at: float
    updated_at: float
    started_at: float | None
    finished_at: float | None
    turn: int
    attempts: int
    usage: dict[str, int] = Field(default_factory=dict)

    @classmethod
    def of(cls, task: Task) -> TaskOut:
        return cls.model_validate(task.to_dict())


class TaskDetail(TaskOut):
    subtree: list[TaskOut] = Field(
        description="Every task below this one, parents before children (follow parent_id)."
    )
    tree_files: list[str] = Field(description="Every file delivered in the tree, each once.")
    counts: dict[str, int] = Field(description="Tasks in the tree (itself included) by status.")


class TaskPage(BaseModel):
    tasks: list[TaskOut]
    limit: int
    offset: int
    next_offset: int | None = Field(description="Pass as offset for the next page; null at end.")


class CancelResult(BaseModel):
    task: TaskOut
    cancelled: list[str] = Field(description="Ids of every task this cancelled (the subtree).")


class EventOut(BaseModel):
    seq: int = Field(description="Position in the log: gapless, in commit order.")
    ts: float
    kind: str
    task_id: str | None
    agent: str | None
    data: dict[str, Any]


class EventPage(BaseModel):
    events: list[EventOut]
    next_after: int = Field(description="Pass as `after` to read on from here.")
    last_seq: int = Field(description="The newest event in the log when this page was read.")


class AgentOut(BaseModel):
    id: str
    name: str
    title: str
    reports_to: str | None
    reports: list[str]
    tools: list[str]
    instructions: str
    model: str | None = Field(
        None, description="The model the agent runs on, when the chart or the office says."
    )


class PriceOut(BaseModel):
    input: float = Field(description="USD per million prompt tokens.")
    output: float = Field(description="USD per million completion tokens.")
    cached_input: float | None = Field(description="USD per million cached prompt tokens.")


class OrgOut(BaseModel):
    company: str
    description: str
    max_concurrent: int
    top: list[str] = Field(description="Agents who report to no one; goals go to them.")
    agents: list[AgentOut]
    brain: str = Field(description="The brain new goals run with.")
    workspace: str = Field(description="The folder new goals' files go to.")
    prices: dict[str, PriceOut] = Field(
        default_factory=dict,
        description="The chart's `llm.prices` by model, for cost estimates; empty when unpriced.",
    )


class ErrorOut(BaseModel):
    detail: str


def error_responses(*codes: int, json: bool = False) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the 4xx answers an operation can give, so /docs shows them.
    json=True spells out the JSON body, for operations whose success is not JSON."""
    meaning = {
        400: "The request cannot be carried out as asked",
        401: "The access token is missing or wrong",
        403: "Not allowed from here",
        404: "Not found",
        409: "The task is in a state that does not allow this",
        422: "The request does not match the schema",
    }
    if json:
        body = {"type": "object", "properties": {"detail": {}}, "required": ["detail"]}
        return {
            code: {"description": meaning[code], "content": {"application/json": {"schema": body}}}
            for code in codes
        }
    return {code: {"model": ErrorOut, "description": meaning[code]} for code in codes}
