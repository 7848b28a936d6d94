"""Teams with a task list: sequential and hierarchical processes on firm's durable engine.

    from firm import Agent, Task, Team

Importing this package registers the "team" brain, so `firm resume` can continue a team's
run. See docs/teams.md.
"""

from __future__ import annotations

from typing import Any

from firm.brains import Brain, register_brain
from firm.teams.errors import TeamError, TeamFailed
from firm.teams.members import Agent, Task
from firm.teams.spec import BRAIN_NAME
from firm.teams.team import Team


def _team_brain(options: dict[str, Any]) -> Brain:
    # Imported when a team's run is worked, not when firm is: it brings in the model client.
    from firm.teams.brain import TeamBrain

    return TeamBrain.from_options(options)


register_brain(BRAIN_NAME, _team_brain)

__all__ = ["Agent", "Task", "Team", "TeamError", "TeamFailed"]
