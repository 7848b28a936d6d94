"""firm: run an AI company you can watch.

An org chart in YAML, a goal for the top agent, and a company that works it: managers
delegate durable subtasks to their reports at any depth, results flow back up, failures
travel up, cancellation travels down, and a restart loses nothing.
"""

from firm.api import Firm
from firm.brains.base import Brain
from firm.brains.protocol import Session, SessionCancelled, ToolResult
from firm.errors import FirmError, OrgChartError, TaskNotFound, ToolError, WorkspaceError
from firm.org import AgentSpec, OrgChart, load_org, parse_org
from firm.store.base import Event
from firm.tasks import Priority, Status, TaskRecord
from firm.teams import Agent, Task, Team, TeamError, TeamFailed
from firm.tools.registry import ToolContext, tool

__version__ = "0.1.0"

# The public surface is what __all__ names, plus firm.testing, firm.brains.protocol and the
# documented extras; every other module is internal (see docs/architecture.md).
__all__ = [
    "Agent",
    "AgentSpec",
    "Brain",
    "Event",
    "Firm",
    "FirmError",
    "OrgChart",
    "OrgChartError",
    "Priority",
    "Session",
    "SessionCancelled",
    "Status",
    "Task",
    "TaskNotFound",
    "TaskRecord",
    "Team",
    "TeamError",
    "TeamFailed",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "WorkspaceError",
    "__version__",
    "load_org",
    "parse_org",
    "tool",
]
