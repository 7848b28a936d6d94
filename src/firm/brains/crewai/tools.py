"""firm's tools as CrewAI tools: the schema CrewAI shows the model is the ToolDef's, the body is
the session's checked path (authority, limits, audit), and only the tools the agent's grant
offers are handed to the agent."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from crewai.tools import BaseTool
from pydantic import PrivateAttr

if TYPE_CHECKING:
    from firm.brains.crewai.turn import Turn
    from firm.tools.registry import ToolDef


class FirmTool(BaseTool):
    """One firm tool offered to one session's agent."""

    # A usage cap makes CrewAI run the calls of one reply one after another instead of in a
    # thread pool: firm's calls are ordered (write a file, then complete_task naming it) and
    # each is checked against the log as it stands after the previous one.
    max_usage_count: int | None = sys.maxsize

    _turn: Turn = PrivateAttr()
    _firm_name: str = PrivateAttr()

    def run(self, *args: Any, **kwargs: Any) -> Any:
        # firm validates the arguments itself, on the checked path, so a bad argument is
        # logged and answered like any other refused call; CrewAI's own check is skipped.
        self.current_usage_count += 1
        return self._turn.call(self._firm_name, dict(kwargs))

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        return self._turn.call(self._firm_name, dict(kwargs))


def crewai_tools(turn: Turn) -> list[BaseTool]:
    """The session's offered tools, as CrewAI tools bound to this session."""
    return [_adapt(t, turn) for t in turn.session.tools()]


def _adapt(tool: ToolDef, turn: Turn) -> BaseTool:
    adapted = FirmTool(
        name=tool.model_name,
        description=tool.description,
        args_schema=tool.args_model,
    )
    adapted._turn = turn
    adapted._firm_name = tool.name
    return adapted
