"""The crewai brain: each work session is its own one-agent, one-task CrewAI crew.

CrewAI runs the agent loop (prompting, tool calling, its provider client); firm owns
everything around it. The Agent is the chart's agent (role: its title; goal: its standing
instructions; backstory: the same stable description the llm brain gives — who it reports to,
its reports, how it works); the Task is firm's brief for the session; the tools are the ones
its grant offers, each running through the session's checked path (see tools.py and turn.py).

The model settings are the llm brain's (`LLMBrain.settings_for`: the chart's `llm:` block,
--model, FIRM_MODEL, OPENAI_BASE_URL, the key from OPENAI_API_KEY or `llm.api_key_env`).
"""

from __future__ import annotations

import logging
import warnings
from typing import TYPE_CHECKING, Any

from crewai import Agent, Crew, Process, Task
from crewai.agents.parser import AgentAction, AgentFinish

from firm.brains.crewai.model import SessionLLM
from firm.brains.crewai.tools import crewai_tools
from firm.brains.crewai.turn import Cancelled, EndSession, Turn
from firm.brains.llm import LLMBrain
from firm.brains.llm_client import classify
from firm.brains.llm_prompt import system_prompt
from firm.errors import FirmError
from firm.org import OrgChart

if TYPE_CHECKING:
    from firm.brains.llm import AgentSettings
    from firm.brains.protocol import Session

EXPECTED_OUTPUT = (
    "The task done. Finish with complete_task (your result, and the files that hold it), "
    "or fail_task with the reason; after delegating, stop calling tools to end your turn."
)

# CrewAI warns on every call to a model it has no tokenizer for; firm records the provider's
# own usage, so the estimate it warns about is not used.
logging.getLogger("crewai.llms.base_llm").setLevel(logging.ERROR)
# A crew lives for one session and is never checkpointed, so a callback that cannot be
# serialised costs nothing; CrewAI warns about it on every agent.
warnings.filterwarnings("ignore", message="function callbacks cannot be serialized")


class CrewAIBrain:
    name = "crewai"

    def __init__(self, llm: LLMBrain):
        self.llm = llm

    @classmethod
    def option_names(cls) -> list[str]:
        return LLMBrain.option_names()

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> CrewAIBrain:
        try:
            return cls(LLMBrain.from_options(options))
        except FirmError as exc:
            raise FirmError(str(exc).replace("llm option", "crewai option")) from None

    def options(self) -> dict[str, Any]:
        return self.llm.options()

    def check_company(self, org: OrgChart) -> None:
        self.llm.check_company(org)

    # --- a session ---------------------------------------------------------------------------

    def run(self, session: Session) -> str | None:
        try:
            settings = self.llm.settings_for(session.org, session.agent_id)
        except FirmError as exc:
            session.give_up(str(exc))
            return None
        turn = Turn(session, max_iterations=settings.loop.max_iterations)
        try:
            crew = self._crew(session, settings, turn)
            output = crew.kickoff()
        except EndSession:
            return None
        except Cancelled as stop:
            raise stop.cause from None
        except Exception as exc:
            self._failed(session, settings, exc)
            return None
        text = str(getattr(output, "raw", "") or "")
        return text or None

    def _crew(self, session: Session, settings: AgentSettings, turn: Turn) -> Crew:
        org, me = session.org, session.agent
        endpoint, loop = settings.endpoint, settings.loop
        llm = SessionLLM(
            model=loop.model,
            base_url=endpoint.base_url,
            api_key=endpoint.api_key,
            custom_openai=endpoint.base_url is not None,
            temperature=loop.temperature,
            max_tokens=loop.max_tokens,
            timeout=endpoint.timeout,
            max_retries=self.llm.max_retries,
            # firm.testing and proxies read who is calling from these (as with the llm brain).
            default_headers={"X-Firm-Agent": session.agent_id, "X-Firm-Task": session.task_id},
        )
        llm._turn = turn
        tools = crewai_tools(turn)
        agent = Agent(
            role=f"{me.title} at {org.company}",
            goal=me.instructions.strip() or f"Do the tasks you are given as {me.title}, well.",
            backstory=system_prompt(org, session.agent_id, session.tools()),
            llm=llm,
            tools=tools,
            allow_delegation=False,  # delegation is firm's own tool, checked like any other
            # firm enforces the model-call cap itself (Turn.before_call), and fails the task
            # there; CrewAI's own cap would instead ask the model for one more, forced answer.
            max_iter=loop.max_iterations + 2,
            step_callback=lambda step: _step(turn, step),
            verbose=False,
            cache=False,  # a tool call is an act with authority: it runs, and is audited, each time
        )
        task = Task(description=session.brief, expected_output=EXPECTED_OUTPUT, agent=agent)
        return Crew(agents=[agent], tasks=[task], process=Process.sequential, verbose=False)

    def _failed(self, session: Session, settings: AgentSettings, exc: Exception) -> None:
        """A CrewAI or provider error: a clear task failure (or the end of the turn when the
        session already delegated), never a traceback."""
        reason = _reason(exc, settings)
        if session.ended:
            return
        if session.delegated:
            session.think(f"Ending the turn: {reason}")
            return
        session.give_up(reason)


def _step(turn: Turn, step: Any) -> None:
    """CrewAI's step callback: its thoughts go to the activity log; a cancel stops it here."""
    if isinstance(step, AgentAction | AgentFinish) and step.thought.strip():
        turn.session.think(step.thought)
    turn.check_cancelled()


def _reason(exc: BaseException, settings: AgentSettings) -> str:
    """The most telling cause in the chain: a model API error says what to fix."""
    seen: BaseException | None = exc
    while seen is not None:
        module = type(seen).__module__
        if module.startswith("openai"):
            return str(classify(seen, settings.endpoint, settings.loop.model))
        seen = seen.__cause__ or seen.__context__
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"the crewai brain failed: {type(exc).__name__}: {message}"[:1000]
