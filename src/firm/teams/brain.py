"""The team brain: one brain for a team's run, handing each session to the right part.

The coordinator's sessions run the process (deterministic, no model), the manager's
sessions are manager turns, and every other agent is an ordinary LLM-brain agent. Its
options — the team's spec and the LLM brain's options — are stored with the run, so
`firm resume` rebuilds it from the database alone; the key is read from the environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from firm.brains.llm import LLMBrain
from firm.errors import FirmError
from firm.teams.coordinator import run_coordinator
from firm.teams.manager import run_manager_turn
from firm.teams.spec import BRAIN_NAME, COORDINATOR, TeamSpec

if TYPE_CHECKING:
    from firm.brains.protocol import Session
    from firm.org import OrgChart


@dataclass
class TeamBrain:
    spec: TeamSpec
    llm: LLMBrain
    name: str = BRAIN_NAME
    _options: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> TeamBrain:
        unknown = set(options) - {"team", "llm"}
        if unknown or "team" not in options:
            raise FirmError(
                "the team brain takes the options 'team' (the team's spec) and 'llm'; "
                f"got: {', '.join(sorted(options)) or 'none'}"
            )
        try:
            spec = TeamSpec.model_validate(options["team"])
        except Exception as exc:
            raise FirmError(f"the stored team is not readable by this firm: {exc}") from None
        return cls(spec, LLMBrain.from_options(dict(options.get("llm") or {})), _options=options)

    def options(self) -> dict[str, Any]:
        return {"team": self.spec.model_dump(mode="json"), "llm": self.llm.options()}

    def check_company(self, org: OrgChart) -> None:
        """Fail before anything starts if an agent that calls a model has no model or key."""
        for agent in org.agents:
            if agent.id != COORDINATOR:
                self.llm.settings_for(org, agent.id)

    def run(self, session: Session) -> str | None:
        if session.agent_id == COORDINATOR:
            run_coordinator(session, self.spec)
            return None
        manager = self.spec.manager
        if self.spec.hierarchical and manager is not None and session.agent_id == manager.id:
            run_manager_turn(session, self.spec, self.llm)
            return None
        return self.llm.run(session)
