"""Teams with a task list: sequential and hierarchical processes on firm's durable engine.

    from firm import Agent, Task, Team

Importing this package registers the "team" brain, so `firm resume` can continue a team's
run. See docs/teams.md.
"""

from firm.process import brain as _brain  # noqa: F401  (registers the "team" brain)
from firm.process.team import Agent, Task, Team, TeamError, TeamFailed

__all__ = ["Agent", "Task", "Team", "TeamError", "TeamFailed"]
