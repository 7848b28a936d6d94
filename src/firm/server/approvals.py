"""The API for people in the chain of command: what waits for a decision, approve, deny.

A decision needs a token (FIRM_TOKEN, or a named one from FIRM_TOKENS); the name the token
stands for is what the signed log records as who decided.
"""

# No `from __future__ import annotations`: FastAPI reads the handlers' annotations at run time.
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, HTTPException, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from firm.errors import AlreadyDecided, ApprovalNotFound
from firm.server.models import error_responses
from firm.server.office import Office
from firm.server.routes import read_guard, read_security, token_holder
from firm.store.approvals import APPROVED, DENIED, NOTE_MAX

ApprovalId = Annotated[
    str, Path(min_length=1, max_length=64, description="An approval id, e.g. A-1a2b3c4d")
]


class ApprovalOut(BaseModel):
    id: str
    kind: Literal["call", "plan"] = Field(
        "call",
        description="A tool call, or a plan: a turn's delegations, listed in args.delegations "
        "(task_id, to, title, brief, tools)",
    )
    task_id: str
    root_id: str
    agent: str
    tool: str
    args: dict[str, Any]
    args_digest: str
    summary: str
    rule: str
    status: str
    requested_at: float
    timeout_at: float | None
    decided_at: float | None
    decided_by: str | None
    note: str | None
    ok: bool | None


class ApproveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    note: Annotated[str, Field(max_length=NOTE_MAX)] | None = None


class DenyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: Annotated[str, Field(min_length=1, max_length=NOTE_MAX)]


def build_router(office: Office) -> APIRouter:
    policy = office.policy
    store = office.store
    may_read = read_guard(policy)
    router = APIRouter(prefix="/api")
    Who = Annotated[str, Depends(token_holder(policy))]

    @router.get(
        "/approvals",
        responses=error_responses(401, 403),
        summary="Tool calls waiting for a person (or all, with status=all)",
        dependencies=[Depends(may_read)],
        openapi_extra=read_security(policy),
    )
    def list_approvals(
        status: Annotated[
            Literal[
                "pending",
                "approved",
                "denied",
                "timed_out",
                "withdrawn",
                "ran",
                "running",
                "interrupted",
                "all",
            ],
            Query(),
        ] = "pending",
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
        task: Annotated[
            str | None, Query(min_length=1, max_length=64, description="Only this task's calls")
        ] = None,
    ) -> list[ApprovalOut]:
        items = store.approvals(
            status=None if status == "all" else status, task_id=task, limit=limit
        )
        return [ApprovalOut(**a.to_dict()) for a in items]

    def decide(approval_id: str, decision: str, who: str, note: str | None) -> ApprovalOut:
        try:
            decided = store.decide_approval(approval_id, decision, who, note)
        except ApprovalNotFound as exc:
            raise HTTPException(404, str(exc)) from None
        except AlreadyDecided as exc:
            raise HTTPException(409, str(exc)) from None
        return ApprovalOut(**decided.to_dict())

    @router.post(
        "/approvals/{approval_id}/approve",
        responses=error_responses(400, 401, 404, 409),
        summary="Approve a waiting call: it runs once, with exactly the arguments shown",
    )
    def approve(
        approval_id: ApprovalId, who: Who, body: Annotated[ApproveRequest | None, Body()] = None
    ) -> ApprovalOut:
        return decide(approval_id, APPROVED, who, (body or ApproveRequest()).note)

    @router.post(
        "/approvals/{approval_id}/deny",
        responses=error_responses(400, 401, 404, 409),
        summary="Deny a waiting call: it does not run; the agent is told the reason",
    )
    def deny(approval_id: ApprovalId, who: Who, body: DenyRequest) -> ApprovalOut:
        return decide(approval_id, DENIED, who, body.reason)

    return router
