"""The runs API: every goal the office has worked, and one goal's events to watch it again.

A run is a goal and its whole tree of tasks. Its events come straight from the log, so a replay
in the page goes through exactly the states the live feed went through.
"""

# No `from __future__ import annotations`: FastAPI reads the handlers' annotations at run time.
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from firm.server.models import EventOut, StatusName, error_responses
from firm.server.office import Office
from firm.server.routes import TaskId, read_guard
from firm.store.runs import RunSummary


class AgentUsageOut(BaseModel):
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None = Field(description="Estimated USD from the chart's llm.prices, if priced.")


class RunOut(BaseModel):
    """A goal (root task) with what its whole tree has done."""

    id: str = Field(description="The root task's id; also the run's id.")
    title: str
    status: StatusName = Field(description="The root task's status.")
    assignee: str
    created_at: float
    started_at: float | None
    finished_at: float | None
    result: str | None
    error: str | None
    tasks: int = Field(description="Tasks in the tree, the root included.")
    counts: dict[str, int] = Field(description="Tasks in the tree by status.")
    calls: int = Field(description="Model calls made by the tree's sessions.")
    prompt_tokens: int
    completion_tokens: int
    cost: float | None = Field(
        description="Estimated USD from the chart's `llm.prices`; null when a model that made "
        "calls has no price."
    )
    agents: dict[str, AgentUsageOut] = Field(
        description="Model usage per agent (desk) that made calls in the run."
    )


class RunPage(BaseModel):
    runs: list[RunOut]
    limit: int
    offset: int
    next_offset: int | None = Field(description="Pass as offset for the next page; null at end.")


class RunEventPage(BaseModel):
    run: str
    events: list[EventOut]
    next_after: int = Field(description="Pass as `after` to read on from here.")
    more: bool = Field(description="True when events after this page already exist.")


def build_router(office: Office) -> APIRouter:
    store = office.store
    read: dict[str, Any] = {"dependencies": [Depends(read_guard(office.policy))]}
    if not office.policy.reads_need_token:
        read["openapi_extra"] = {"security": [{}, {"HTTPBearer": []}]}  # type: ignore[assignment]
    router = APIRouter(prefix="/api")

    @router.get("/runs", responses=error_responses(401, 403), summary="List runs", **read)
    def list_runs(
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    ) -> RunPage:
        """Every goal, newest first, with task counts, model calls and tokens; a page at a time."""
        rows = store.run_summaries(limit=limit + 1, offset=offset)
        more = len(rows) > limit
        return RunPage(
            runs=[_run_out(office, s) for s in rows[:limit]],
            limit=limit,
            offset=offset,
            next_offset=offset + limit if more else None,
        )

    @router.get(
        "/runs/{run_id}/events",
        responses=error_responses(401, 403, 404),
        summary="One run's events, to watch it again",
        **read,
    )
    def run_events(
        run_id: TaskId,
        after: Annotated[
            int, Query(ge=0, le=2**62, description="Return events with seq greater than this.")
        ] = 0,
        limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
    ) -> RunEventPage:
        """The events of the goal's whole tree, in log order and no one else's. Page with
        `after=next_after` while `more` is true."""
        events = store.run_events(run_id, after, limit + 1)
        page = events[:limit]
        return RunEventPage(
            run=run_id,
            events=[EventOut.model_validate(e.to_dict()) for e in page],
            next_after=page[-1].seq if page else after,
            more=len(events) > limit,
        )

    return router


def _run_out(office: Office, s: RunSummary) -> RunOut:
    agents = {
        agent: AgentUsageOut(
            calls=calls,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost=office.cost(agent, prompt, completion),
        )
        for agent, (calls, prompt, completion) in s.by_agent.items()
    }
    # A run with unpriced calls has no honest total; in a priced office one without calls
    # cost nothing.
    costs = [a.cost for a in agents.values()]
    total: float | None = None
    if office.prices is not None and all(c is not None for c in costs):
        total = sum(c for c in costs if c is not None)
    return RunOut(
        id=s.root.id,
        title=s.root.title,
        status=str(s.root.status),  # type: ignore[arg-type]
        assignee=s.root.assignee,
        created_at=s.root.created_at,
        started_at=s.root.started_at,
        finished_at=s.root.finished_at,
        result=s.root.result,
        error=s.root.error,
        tasks=s.tasks,
        counts=s.counts,
        calls=s.calls,
        prompt_tokens=s.prompt_tokens,
        completion_tokens=s.completion_tokens,
        cost=total,
        agents=agents,
    )
