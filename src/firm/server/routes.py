"""The HTTP API: goals, tasks, cancellation, the org chart, the activity log, workspace files.

The router is built for one office, so its OpenAPI schema says exactly what that office
accepts: which agents a goal can go to, and whether reads need the token. Handlers are plain
functions: FastAPI runs them in its thread pool, which suits the store's blocking calls. Every
failure a caller can cause is a 4xx with a sentence saying why.
"""

# No `from __future__ import annotations` here: FastAPI reads these handlers' annotations at
# run time, and the goal model is local to build_router.
import math
import os
import stat
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from firm.errors import FirmError, OrgChartError, TaskNotFound, WorkspaceError
from firm.server.access import AccessPolicy
from firm.server.models import (
    CancelRequest,
    CancelResult,
    EventOut,
    EventPage,
    OrgOut,
    StatusName,
    TaskDetail,
    TaskOut,
    TaskPage,
    error_responses,
    goal_model,
)
from firm.server.office import FileMissing, NotOpen, Office, UnknownAgent

FILE_READ_CAP = 1024 * 1024
UNICODE_MESSAGE = (
    "Input should be Unicode text: it holds a lone surrogate escape (\\ud800 to \\udfff) "
    "that no UTF-8 text can carry"
)

bearer = HTTPBearer(
    auto_error=False,
    description="The access token `firm serve` printed (or FIRM_TOKEN). Needed for changes, "
    "and for everything when the office is bound to an address other than loopback.",
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
TaskId = Annotated[str, Path(min_length=1, max_length=64, description="A task id, e.g. T-1a2b3c4d")]


def unauthorised(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})


def read_guard(policy: AccessPolicy) -> Callable[[Request, Credentials], None]:
    """The dependency every read goes through (the API's and the OpenAPI schema's)."""

    def may_read(request: Request, credentials: Credentials) -> None:
        presented = credentials.credentials if credentials else None
        refusal = policy.read_refusal(presented, request.headers.get("host"))
        if refusal is None:
            return
        if presented is None and not policy.reads_need_token:
            raise HTTPException(403, refusal)  # a foreign Host on loopback
        raise unauthorised(refusal)

    return may_read


def read_security(policy: AccessPolicy) -> dict[str, Any]:
    """The OpenAPI note for reads: on loopback a read may come without the token ({} = no
    auth)."""
    return {} if policy.reads_need_token else {"security": [{}, {"HTTPBearer": []}]}


def token_holder(policy: AccessPolicy) -> Callable[[Credentials], str]:
    """The dependency of a write made in someone's name: the name the presented token stands
    for (refused with 401 when it stands for no one)."""

    def who(credentials: Credentials) -> str:
        presented = credentials.credentials if credentials else None
        name = policy.who(presented)
        if name is None:
            raise unauthorised(policy.write_refusal(presented) or "")
        return name

    return who


def build_router(office: Office) -> APIRouter:
    policy = office.policy
    store = office.store
    may_read = read_guard(policy)

    def may_write(credentials: Credentials) -> None:
        refusal = policy.write_refusal(credentials.credentials if credentials else None)
        if refusal is not None:
            raise unauthorised(refusal)

    read: dict[str, Any] = {
        "dependencies": [Depends(may_read)],
        "openapi_extra": read_security(policy),
    }
    write: dict[str, Any] = {"dependencies": [Depends(may_write)]}
    NewGoal = goal_model([a.id for a in office.org.agents])

    router = APIRouter(prefix="/api")

    @router.post(
        "/tasks",
        status_code=201,
        responses=error_responses(400, 401),
        summary="Give the company a goal",
        **write,
    )
    def submit_goal(goal: NewGoal) -> TaskOut:  # type: ignore[valid-type]
        """Create the root task of a new run; the engine starts on it at once."""
        task = office.submit(
            goal.goal,  # type: ignore[attr-defined]
            to=goal.to,  # type: ignore[attr-defined]
            priority=goal.priority,  # type: ignore[attr-defined]
            language=goal.language,  # type: ignore[attr-defined]
        )
        return TaskOut.of(task)

    @router.get("/tasks", responses=error_responses(401, 403), summary="List tasks", **read)
    def list_tasks(
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
        rows = store.list_tasks(
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
        responses=error_responses(401, 403, 404),
        summary="One task with its subtree",
        **read,
    )
    def get_task(task_id: TaskId) -> TaskDetail:
        """The task, every task below it, and every file the tree delivered."""
        tree = store.subtree(task_id)
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
        responses=error_responses(400, 401, 404, 409),
        summary="Cancel a task and everything open below it",
        **write,
    )
    def cancel_task(
        task_id: TaskId, body: Annotated[CancelRequest | None, Body()] = None
    ) -> CancelResult:
        """Running sessions in the tree stop at their next step; the manager above is told why."""
        reason = (body or CancelRequest()).reason
        task, cancelled = office.cancel(task_id, reason)
        return CancelResult(task=TaskOut.of(task), cancelled=cancelled)

    @router.get("/org", responses=error_responses(401, 403), summary="The org chart", **read)
    def get_org() -> OrgOut:
        """The org chart new goals are given to."""
        return OrgOut.model_validate(office.org_view())

    @router.get(
        "/events",
        responses=error_responses(401, 403),
        summary="The activity log, a page at a time",
        **read,
    )
    def list_events(
        after: Annotated[
            int, Query(ge=0, le=2**62, description="Return events with seq greater than this.")
        ] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 200,
        task: Annotated[
            str | None,
            Query(
                max_length=64,
                description="Only the events of this task (and the cancel that ended it, "
                "when that was written on an ancestor).",
            ),
        ] = None,
    ) -> EventPage:
        """Events in order. Page with `after=next_after` until `events` is empty."""
        last = store.last_seq()
        events = store.events_after(
            after, limit, task_ids=[task] if task else None, with_cancels=True
        )
        return EventPage(
            events=[EventOut.model_validate(e.to_dict()) for e in events],
            next_after=events[-1].seq if events else after,
            last_seq=last,
        )

    @router.get(
        "/files/{path:path}",
        response_class=PlainTextResponse,
        responses={
            200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
            **error_responses(400, 401, 403, 404, 422, json=True),
        },
        summary="A file from the company workspace",
        **read,
    )
    def get_file(
        path: Annotated[str, Path(description="A path relative to the workspace.")],
        run: Annotated[
            str | None,
            Query(max_length=64, description="The goal (root task id) whose workspace to read."),
        ] = None,
    ) -> PlainTextResponse:
        """Read-only, with the same confinement as the agents' file tools; always served as
        plain text (an agent's HTML is shown, never run). Over 1 MiB comes back cut at 1 MiB."""
        workspace = office.workspace_of(run)
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
        text = workspace.read(path, 0, FILE_READ_CAP)  # checks again: a regular file, in bounds
        headers = {
            "Content-Security-Policy": "sandbox; default-src 'none'",
            "X-Firm-Size": str(st.st_size),
        }
        if st.st_size > FILE_READ_CAP:
            headers["X-Firm-Truncated"] = "true"
        return PlainTextResponse(text, headers=headers)

    return router


def printable(value: Any) -> Any:
    """A JSON value that can always be sent. JSON may carry a lone surrogate (\\ud800), but no
    UTF-8 text can: echoing one back would fail while answering. Such characters are spelled
    out as their escape instead; everything else passes unchanged."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {printable(str(k)): printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # NaN and the infinities: JSON has no spelling for them
    if value is None or isinstance(value, bool | int | float):
        return value
    return printable(str(value))


def install_error_handlers(app: FastAPI) -> None:
    """Errors the office raises on purpose become 4xx with their message; every error answer
    says what was wrong without ever failing on what the caller sent."""

    def answer(code: int):  # type: ignore[no-untyped-def]
        async def handler(request: Request, exc: Exception) -> JSONResponse:
            return JSONResponse({"detail": printable(str(exc))}, status_code=code)

        return handler

    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own answer echoes the input, which may hold what UTF-8 cannot encode.
        errors = printable(jsonable_encoder(exc.errors()))
        for error in errors:
            if error.get("type") == "string_unicode":
                error["msg"] = UNICODE_MESSAGE
        return JSONResponse({"detail": errors}, status_code=422)

    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        exc.detail = printable(exc.detail)
        return await http_exception_handler(request, exc)

    app.add_exception_handler(RequestValidationError, invalid_request)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, http_error)  # type: ignore[arg-type]
    for error, code in (
        (TaskNotFound, 404),
        (FileMissing, 404),
        (NotOpen, 409),
        (UnknownAgent, 400),
        (WorkspaceError, 400),
        (OrgChartError, 400),
        (FirmError, 400),
    ):
        app.add_exception_handler(error, answer(code))
