"""A brain that is one Python function per agent: the second kind of test model.

Where `ScriptedModel` answers the llm brain over HTTP, `FunctionBrain` replaces the brain
itself: each session of an agent calls that agent's function with the session, and the
function acts through the session's public methods — `session.call(tool, args)` for every
tool (checked and logged like a model's calls), `session.task`, `session.subtasks` (its
reports' tasks, finished ones on a woken turn), `session.brief`, `session.think(text)`.

    from firm import Firm, parse_org
    from firm.testing import FunctionBrain

    def ceo(session):
        if session.task.turn == 0:
            session.call("delegate_task", {"assignee": "cto", "title": "Plan the app",
                                           "description": "A one-page plan."})
            return None  # the turn ends; the CEO is woken when the CTO has finished
        return "Launched: " + session.subtasks[0].result

    def cto(session):
        return "a plan"  # a session's last text is its result

    brain = FunctionBrain({"ceo": ceo, "cto": cto})
    org = parse_org(
        "company: Co\\nagents:\\n  - {id: ceo, name: Ava, title: CEO}\\n"
        "  - {id: cto, name: Ben, title: CTO, reports_to: ceo}\\n"
    )
    with Firm("test.db", brain=brain) as firm:
        root = firm.run(org, "Launch", workspace="ws", timeout=30)
    assert root.result == "Launched: a plan"
    assert [agent for agent, _turn in brain.sessions_of()] == ["ceo", "cto", "ceo"]

See docs/testing.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from firm.session import Session

AgentFunction = Callable[["Session"], "str | None"]


@dataclass(frozen=True)
class SessionRecord:
    """One session the brain ran: which task, which agent, which turn of the task."""

    task_id: str
    agent: str
    turn: int


class FunctionBrain:
    """Runs agents[agent_id](session) for each session; `default` for agents not listed.

    The function's return value is what a model's last message would be: a string ends the
    session with that text as its result (unless the function called complete_task,
    fail_task or delegated), None ends it silently. An agent with no function and no default
    fails its session with a message naming the agent. Safe to share between sessions running
    at once; `sessions` records every session in the order they started.
    """

    name = "function"

    def __init__(
        self, agents: Mapping[str, AgentFunction], default: AgentFunction | None = None
    ) -> None:
        self.agents = dict(agents)
        self.default = default
        self.sessions: list[SessionRecord] = []
        self._lock = threading.Lock()

    def run(self, session: Session) -> str | None:
        task = session.task
        with self._lock:
            self.sessions.append(SessionRecord(task.id, session.agent_id, task.turn))
        function = self.agents.get(session.agent_id, self.default)
        if function is None:
            raise LookupError(f"FunctionBrain has no function for agent {session.agent_id!r}")
        return function(session)

    def sessions_of(self, agent: str | None = None) -> list[tuple[str, int]]:
        """(agent, turn) of every session run so far (only agent's, when given), in order."""
        with self._lock:
            return [(s.agent, s.turn) for s in self.sessions if agent in (None, s.agent)]
