"""firm: run an AI company you can watch.

An org chart in YAML, a goal for the top agent, and a company that works it: managers
delegate durable subtasks to their reports at any depth, results flow back up, failures
travel up, cancellation travels down, and a restart loses nothing.
"""

from firm.api import Firm
from firm.errors import FirmError, OrgChartError, TaskNotFound, ToolError, WorkspaceError
from firm.org import AgentSpec, OrgChart, load_org, parse_org
from firm.tasks import Priority, Status
from firm.teams import Agent, Task, Team, TeamError, TeamFailed
from firm.tools.registry import ToolContext, tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentSpec",
    "Firm",
    "FirmError",
    "OrgChart",
    "OrgChartError",
    "Priority",
    "Status",
    "Task",
    "TaskNotFound",
    "Team",
    "TeamError",
    "TeamFailed",
    "ToolContext",
    "ToolError",
    "WorkspaceError",
    "__version__",
    "load_org",
    "parse_org",
    "tool",
]
