"""`firm mcp`: a company served over MCP, so an MCP client (a desktop assistant, an IDE) can
give it goals, follow its tasks, read its files and cancel its work.

The engine runs in this process on the same store as the CLI: a goal given here shows in
`firm tasks`, the office and `firm resume` like any other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from firm.api import Firm
from firm.errors import FirmError, StoreError
from firm.org import OrgChart
from firm.tasks import Status, Task
from firm.tools.workspace import Workspace

T = TypeVar("T")

MAX_WAIT = 600.0  # seconds give_goal may hold a client's call open
LIST_LIMIT = 200
RESULT_LIMIT = 20_000  # characters of one task's result in an answer; the rest is cut


class CompanyService:
    """What the MCP tools do, without the protocol: one company, one store, one engine."""

    def __init__(
        self,
        firm: Firm,
        org: OrgChart,
        org_file: Path,
        *,
        brain: str = "simulation",
        brain_options: dict[str, Any] | None = None,
        workspace: Path | None = None,
    ):
        self.firm = firm
        self.org = org
        self.org_file = org_file
        self.brain = brain
        self.brain_options = dict(brain_options or {})
        self.workspace = workspace

    def give_goal(
        self, goal: str, to: str | None = None, wait_seconds: float = 0
    ) -> dict[str, Any]:
        goal = goal.strip()
        if not goal:
            raise FirmError("the goal is empty")
        root = self.firm.submit(
            self.org_file,
            goal,
            to=to,
            brain=self.brain,
            brain_options=self.brain_options,
            workspace=self.workspace,
        )
        wait = min(max(float(wait_seconds), 0.0), MAX_WAIT)
        task = self._wait(root.id, wait) if wait > 0 else root
        return self._summary(task, with_result=True)

    def list_tasks(self, status: str | None = None, root: str | None = None) -> dict[str, Any]:
        filters: dict[str, Any] = {}
        if status:
            try:
                filters["status"] = Status(status)
            except ValueError:
                known = ", ".join(s.value for s in Status)
                raise FirmError(f"unknown status {status!r} (one of: {known})") from None
        if root:
            filters["root_id"] = self._task(root).id
        tasks = self.firm.tasks(**filters)
        shown = tasks[:LIST_LIMIT]
        return {
            "tasks": [self._summary(t) for t in shown],
            "total": len(tasks),
            "shown": len(shown),
        }

    def get_task(self, task_id: str) -> dict[str, Any]:
        task = self._task(task_id)
        tree = self.firm.subtree(task.id)
        return {
            **self._summary(task, with_result=True),
            "subtasks": [self._summary(t, with_result=True) for t in tree if t.id != task.id],
        }

    def cancel_task(self, task_id: str, reason: str = "cancelled over MCP") -> dict[str, Any]:
        task = self._task(task_id)
        cancelled = self.firm.cancel(task.id, reason)
        return {"cancelled": cancelled, "count": len(cancelled)}

    def read_file(self, path: str, task_id: str | None = None) -> str:
        return self._workspace_of(task_id).read(path)

    # --- helpers -----------------------------------------------------------------------

    def _task(self, task_id: str) -> Task:
        try:
            return self.firm.task(task_id.strip())
        except StoreError:
            raise FirmError(f"no task {task_id!r}") from None

    def _wait(self, task_id: str, seconds: float) -> Task:
        deadline = time.monotonic() + seconds
        task = self.firm.task(task_id)
        while not task.terminal and time.monotonic() < deadline:
            time.sleep(0.1)
            task = self.firm.task(task_id)
        return task

    def _workspace_of(self, task_id: str | None) -> Workspace:
        if task_id:
            task = self._task(task_id)
            return Workspace(self.firm.store.run(task.root_id).workspace)
        runs = [t for t in self.firm.tasks() if t.parent_id is None]
        if not runs:
            raise FirmError("no goal has run yet, so there is no workspace to read")
        latest = max(runs, key=lambda t: t.created_at)
        return Workspace(self.firm.store.run(latest.root_id).workspace)

    @staticmethod
    def _summary(task: Task, with_result: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": task.id,
            "title": task.title,
            "status": str(task.status),
            "assignee": task.assignee,
            "parent_id": task.parent_id,
        }
        if with_result:
            result = task.result or ""
            if len(result) > RESULT_LIMIT:
                result = result[:RESULT_LIMIT] + " … (cut; read the task's files for the rest)"
            out.update(result=result or None, files=list(task.files), error=task.error)
        return out


def build_server(service: CompanyService, host: str = "127.0.0.1", port: int = 8765) -> Any:
    """The MCP server object (the SDK's FastMCP) whose tools call `service`; `host` and
    `port` are where it listens when run over streamable HTTP."""
    from mcp.server.fastmcp import FastMCP
    from mcp.server.fastmcp.exceptions import ToolError

    def answer(call: Callable[[], T]) -> T:
        # The client sees firm's message (an unknown task, a path outside the workspace);
        # anything else the SDK reports as an internal error without details.
        try:
            return call()
        except FirmError as exc:
            raise ToolError(str(exc)) from None

    app = FastMCP(
        f"firm: {service.org.company}",
        host=host,
        port=port,
        log_level="WARNING",
        instructions=(
            f"The company {service.org.company!r} run by firm. give_goal hands its top agent a "
            "goal and returns the root task's id; follow it with get_task, read what the "
            "company wrote with read_file, stop it with cancel_task."
        ),
    )

    @app.tool()
    def give_goal(goal: str, to: str | None = None, wait_seconds: float = 0) -> dict[str, Any]:
        """Give the company a goal. `to` names the agent to start it (default: the top agent).
        With wait_seconds > 0 (at most 600), wait that long for it to end and return its
        result; otherwise return at once with the root task's id."""
        return answer(lambda: service.give_goal(goal, to, wait_seconds))

    @app.tool()
    def list_tasks(status: str | None = None, root: str | None = None) -> dict[str, Any]:
        """List tasks (newest first), optionally only one status (todo, in_progress, waiting,
        done, failed, cancelled) or one goal's tree (root = the root task's id)."""
        return answer(lambda: service.list_tasks(status, root))

    @app.tool()
    def get_task(id: str) -> dict[str, Any]:
        """One task with its subtree: status, result, files and error of each."""
        return answer(lambda: service.get_task(id))

    @app.tool()
    def cancel_task(id: str) -> dict[str, Any]:
        """Cancel a task and its open subtree."""
        return answer(lambda: service.cancel_task(id))

    @app.tool()
    def read_file(path: str, task: str | None = None) -> str:
        """Read a file the company wrote (a path relative to its workspace); `task` picks the
        goal whose workspace to read (default: the latest goal's)."""
        return answer(lambda: service.read_file(path, task))

    return app
