"""Error types a user can act on. The CLI turns each into one line and an exit code."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


class FirmError(Exception):
    """Base class for every error firm raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a file: where it is and what is wrong."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"


class OrgChartError(FirmError):
    """The org chart is malformed. Carries every problem found, each with file, line and field."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class TaskNotFound(FirmError):
    def __init__(self, task_id: str):
        self.task_id = task_id
        super().__init__(f"no task with id {task_id!r}")


class StoreError(FirmError):
    """The store cannot be opened or used as asked."""


class TaskNotHeld(StoreError):
    """A session acted on a task it no longer holds: cancelled, ended, or handed to another
    worker after its lease ran out. The session stops; it is not the agent's mistake."""


class WorkspaceError(FirmError):
    """A path or file operation would break the workspace's confinement or limits."""


class ToolError(FirmError):
    """A tool was called wrongly; the message goes back to the model so it can correct itself."""


def some_of(names: Iterable[str], shown: int = 20) -> str:
    """The first `shown` names, comma-separated, and how many more: an error line about a
    100,000-agent chart stays one readable line, not hundreds of kilobytes."""
    names = list(names)
    head = ", ".join(names[:shown])
    rest = len(names) - shown
    return f"{head}, … and {rest:,} more" if rest > 0 else head


class ApprovalNotFound(FirmError):
    def __init__(self, approval_id: str):
        self.approval_id = approval_id
        super().__init__(f"no approval with id {approval_id!r}")


class AlreadyDecided(FirmError):
    """A second decision on an approval: refused, the first one stands."""
