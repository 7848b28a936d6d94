"""The brain boundary: what a brain (or a team's coordinator and manager) may do with its
session, and nothing more. Brains program against this protocol; the engine's session
(firm.session) implements it. A brain never holds the store or the company: every effect goes
through a checked `call`, and everything it writes to the activity log through `log`.

    from firm import Session, SessionCancelled, ToolResult

    class EchoBrain:
        name = "echo"

        def run(self, session: Session) -> str | None:
            session.think(f"working on: {session.brief[:80]}")
            result = session.call("complete_task", {"result": session.brief})
            return None if result.ok else str(result)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from firm.authority.check import Denial
    from firm.authority.grants import Grant
    from firm.org import AgentSpec, OrgChart
    from firm.store.base import Event
    from firm.tasks import Task
    from firm.tools.registry import ToolDef
    from firm.tools.workspace import Workspace


class SessionCancelled(Exception):
    """Raised into a brain when its task was cancelled (or its worker is stopping)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True)
class ToolResult:
    """What a call returned: ok, the text the model reads, and the denial if it was denied."""

    ok: bool
    content: str
    denied: Denial | None = None

    def __str__(self) -> str:
        return self.content


class DelegationBatch(Protocol):
    """The delegations of one reply, written together when their block ends."""

    def end_turn(self) -> None:
        """This reply ends the session's turn, as a reply that only delegates does: the
        block's end writes its delegations and the turn's end in one transaction, so the
        task waits for its reports (holding no worker) from that commit on, and the session
        is over — the brain returns; later calls are refused. Where that cannot be (the
        block raised, a call in it failed the task, or the chart puts the delegations
        before a person), the delegations are written alone and the turn ends as before,
        when the brain returns."""
        ...


@runtime_checkable
class Session(Protocol):
    """One agent working one task, as a brain sees it."""

    # --- what the brain reads ------------------------------------------------------------
    task_id: str
    agent_id: str
    task: Task  # the task as it was claimed (title, description, turn, grant, root)
    subtasks: list[Task]  # this task's reports' tasks, as they stood when the session began
    brief: str  # what the agent is told: the task, its context, its reports' results
    workspace: Workspace
    delegated: list[str]  # subtasks delegated in this session

    @property
    def org(self) -> OrgChart: ...

    @property
    def agent(self) -> AgentSpec: ...

    @property
    def reports(self) -> list[AgentSpec]: ...

    @property
    def grant(self) -> Grant:
        """The authority this task runs under (scopes, ceilings, expiry, token budget)."""
        ...

    @property
    def ended(self) -> bool:
        """complete_task or fail_task has been called: nothing more will run."""
        ...

    def tools(self) -> list[ToolDef]:
        """The tools offered to this agent (lifecycle tools, then what its grant allows)."""
        ...

    def find_tool(self, name: str) -> ToolDef | None:
        """A tool by dotted name or by the name models see; None if the company has none."""
        ...

    def subtree(self, task_id: str | None = None) -> list[Task]:
        """A task of this run and everything below it, read now (default: this task)."""
        ...

    def events_of(self, task_ids: Iterable[str], kinds: Iterable[str] | None = None) -> list[Event]:
        """The activity log's entries about these tasks of this run, in order; with `kinds`,
        those of these kinds only (read by an index, not filtered after reading them all)."""
        ...

    # --- what the brain does -------------------------------------------------------------
    def batch_delegations(self) -> AbstractContextManager[DelegationBatch]:
        """Within the block, delegate_task calls are written together in one transaction when
        it ends (the calls of one model reply, say), so the subtasks start at once. A brain
        whose reply ends its turn with them says so (DelegationBatch.end_turn)."""
        ...

    def call(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> ToolResult:
        """Run a tool through the one checked path (arguments made canonical, authority
        checked, the call logged). Mistakes come back as ToolResult(ok=False, ...)."""
        ...

    def give_up(self, reason: str) -> None:
        """End the task as failed, through the checked path (a fail_task call)."""
        ...

    def think(self, text: str) -> None:
        """Put what the agent is thinking in the activity log."""
        ...

    def stream(self, text: str) -> None:
        """The paragraph the agent is writing, so far, for people watching live (a desk in
        the office); "" once it is in the log through think(). Never logged; a no-op where
        nothing listens."""
        ...

    def log(self, kind: str, data: Mapping[str, Any]) -> None:
        """Append one activity event about this task (a kind from firm.events)."""
        ...

    def owing(self) -> AbstractContextManager[None]:
        """Within the block, think() and log() entries ride the session's next write instead
        of costing one each (written at the latest before the next model call or wait)."""
        ...

    def record_usage(self, calls: int, prompt_tokens: int, completion_tokens: int) -> None: ...

    def tokens_remaining(self) -> int | None:
        """Model tokens this session may still spend; None means unlimited."""
        ...

    # --- cancellation --------------------------------------------------------------------
    @property
    def cancelled(self) -> bool: ...

    def check_cancelled(self) -> None:
        """Raise SessionCancelled if the task was cancelled; call it between steps."""
        ...

    def cancel_signalled(self) -> bool:
        """The in-process cancel signal only (no store read): cheap enough for a tight loop."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait, waking (with SessionCancelled) at once if the task is cancelled."""
        ...
