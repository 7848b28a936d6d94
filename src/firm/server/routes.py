"""The HTTP API: goals, tasks, cancellation, the org chart, the activity log, workspace files.

Handlers are plain functions: FastAPI runs them in its thread pool, which suits the store's
blocking calls. Every failure a caller can cause maps to a 4xx with a sentence saying why.
"""

from __future__ import annotations

import os
import stat
from typing import Annotated

from fastapi import APIRouter, Body, Depends, HTTPException, Path, Query, Request, Response
from fastapi.responses import PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from firm.errors import TaskNotFound, WorkspaceError
from firm.server.models import (
    CancelRequest,
    CancelResult,
    EventOut,
    EventPage,
    NewGoal,
    OrgOut,
    StatusName,
    TaskDetail,
    TaskOut,
    TaskPage,
    error_responses,
)
from firm.server.office import FileMissing, Office

bearer = HTTPBearer(
    auto_error=False,
    description="The access token `firm serve` printed (or FIRM_TOKEN). Needed for changes, "
    "and for everything when the office is bound to an address other than loopback.",
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
TaskId = Annotated[str, Path(min_length=1, max_length=64, description="A task id, e.g. T-1a2b3c4d")]

FILE_READ_CAP = 1024 * 1024


def office_of(request: Request) -> Office:
    return request.app.state.office  # type: ignore[no-any-return]


def unauthorised(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})


def may_read(request: Request, credentials: Credentials) -> None:
    presented = credentials.credentials if credentials else None
    refusal = office_of(request).policy.read_refusal(presented, request.headers.get("host"))
    if refusal is None:
        return
    if presented is None and not office_of(request).policy.reads_need_token:
        raise HTTPException(403, refusal)  # a foreign Host on loopback: no token would help here
    raise unauthorised(refusal)


def may_write(request: Request, credentials: Credentials) -> None:
    presented = credentials.credentials if credentials else None
    refusal = office_of(request).policy.write_refusal(presented)
    if refusal is not None:
        raise unauthorised(refusal)


read = [Depends(may_read)]
write = [Depends(may_write)]

router = APIRouter(prefix="/api")


@router.post(
    "/tasks",
    status_code=201,
    dependencies=write,
    responses=error_responses(400, 401),
    summary="Give the company a goal",
)
def submit_goal(request: Request, goal: NewGoal) -> TaskOut:
    """Create the root task of a new run; the engine starts on it at once."""
    task = office_of(request).submit(
        goal.goal, to=goal.to, priority=goal.priority, language=goal.language
    )
    return TaskOut.of(task)


@router.get("/tasks", dependencies=read, responses=error_responses(401, 403), summary="List tasks")
def list_tasks(
    request: Request,
    status: Annotated[StatusName | None, Query(description="Only tasks in this state.")] = None,
    assignee: Annotated[
        str | None, Query(max_length=64, description="Only this agent's tasks.")
    ] = None,
    root: Annotated[
        str | None, Query(max_length=64, description="Only the tasks of this goal (root id).")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> TaskPage:
    """Tasks oldest first, a page at a time."""
    rows = office_of(request).store.list_tasks(
        status=status, assignee=assignee, root_id=root, limit=limit + 1, offset=offset
    )
    more = len(rows) > limit
    return TaskPage(
        tasks=[TaskOut.of(t) for t in rows[:limit]],
        limit=limit,
        offset=offset,
        next_offset=offset + limit if more else None,
    )


@router.get(
    "/tasks/{task_id}",
    dependencies=read,
    responses=error_responses(401, 403, 404),
    summary="One task with its subtree",
)
def get_task(request: Request, task_id: TaskId) -> TaskDetail:
    """The task, every task below it, and every file the tree delivered."""
    tree = office_of(request).store.subtree(task_id)
    counts: dict[str, int] = {}
    for t in tree:
        counts[str(t.status)] = counts.get(str(t.status), 0) + 1
    return TaskDetail(
        **TaskOut.of(tree[0]).model_dump(),
        subtree=[TaskOut.of(t) for t in tree[1:]],
        tree_files=list(dict.fromkeys(f for t in tree for f in t.files)),
        counts=counts,
    )


@router.post(
    "/tasks/{task_id}/cancel",
    dependencies=write,
    responses=error_responses(401, 404, 409),
    summary="Cancel a task and everything open below it",
)
def cancel_task(
    request: Request, task_id: TaskId, body: Annotated[CancelRequest | None, Body()] = None
) -> CancelResult:
    """Running sessions in the tree stop at their next step; the manager above is told why."""
    reason = (body or CancelRequest()).reason
    task, cancelled = office_of(request).cancel(task_id, reason)
    return CancelResult(task=TaskOut.of(task), cancelled=[t.id for t in cancelled])


@router.get("/org", dependencies=read, responses=error_responses(401, 403), summary="Org chart")
def get_org(request: Request) -> OrgOut:
    """The org chart new goals are given to."""
    return OrgOut.model_validate(office_of(request).org_view())


@router.get(
    "/events",
    dependencies=read,
    responses=error_responses(401, 403),
    summary="The activity log, a page at a time",
)
def list_events(
    request: Request,
    after: Annotated[
        int, Query(ge=0, le=2**62, description="Return events with seq greater than this.")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    task: Annotated[
        str | None, Query(max_length=64, description="Only the events of this task.")
    ] = None,
) -> EventPage:
    """Events in order. Page with `after=next_after` until `events` is empty."""
    store = office_of(request).store
    last = store.last_seq()
    events = store.events_after(after, limit, task_ids=[task] if task else None)
    return EventPage(
        events=[EventOut.model_validate(e.to_dict()) for e in events],
        next_after=events[-1].seq if events else after,
        last_seq=last,
    )


@router.get(
    "/files/{path:path}",
    dependencies=read,
    response_class=PlainTextResponse,
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
        **error_responses(400, 401, 403, 404),
    },
    summary="A file from the company workspace",
)
def get_file(
    request: Request,
    path: Annotated[str, Path(description="A path relative to the workspace.")],
    run: Annotated[
        str | None,
        Query(max_length=64, description="The goal (root task id) whose workspace to read."),
    ] = None,
) -> Response:
    """Read-only, with the same confinement as the agents' file tools; always served as plain
    text (an agent's HTML is shown, never run). Files over 1 MiB come back cut at 1 MiB."""
    workspace = office_of(request).workspace_of(run)
    try:
        target = workspace.resolve(path)
    except WorkspaceError as exc:
        raise HTTPException(403, str(exc)) from None
    try:
        st = os.stat(target, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        raise HTTPException(404, f"{path!r} is not in the workspace") from None
    if stat.S_ISDIR(st.st_mode):
        raise HTTPException(400, f"{path!r} is a folder, not a file")
    text = workspace.read(path, 0, FILE_READ_CAP)  # checks again: regular file, no symlink out
    headers = {
        "Content-Security-Policy": "sandbox; default-src 'none'",
        "X-Firm-Size": str(st.st_size),
    }
    if st.st_size > FILE_READ_CAP:
        headers["X-Firm-Truncated"] = "true"
    return PlainTextResponse(text, headers=headers)


def install_error_handlers(app) -> None:  # type: ignore[no-untyped-def]
    """Errors the office raises on purpose become 4xx with their message."""
    from fastapi.responses import JSONResponse

    from firm.errors import FirmError, OrgChartError
    from firm.server.office import NotOpen, UnknownAgent

    def answer(code: int):  # type: ignore[no-untyped-def]
        async def handler(request: Request, exc: Exception) -> JSONResponse:
            return JSONResponse({"detail": str(exc)}, status_code=code)

        return handler

    app.add_exception_handler(TaskNotFound, answer(404))
    app.add_exception_handler(FileMissing, answer(404))
    app.add_exception_handler(NotOpen, answer(409))
    app.add_exception_handler(UnknownAgent, answer(400))
    app.add_exception_handler(WorkspaceError, answer(400))
    app.add_exception_handler(OrgChartError, answer(400))
    app.add_exception_handler(FirmError, answer(400))
