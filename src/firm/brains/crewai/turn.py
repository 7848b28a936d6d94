"""What one CrewAI session knows about itself between the model and the tools.

CrewAI owns the agent loop, so firm's rules are enforced at its two seams: every model call
goes through `Turn.before_call`/`after_call` (see model.py) and every tool call through
`Turn.call` (see tools.py). Ending the session early is done by raising a BaseException
subclass: CrewAI turns ordinary exceptions from tools into tool errors for the model, and
these must instead unwind the whole crew to the brain, which catches them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from firm.brains.protocol import SessionCancelled
from firm.events import EventKind

if TYPE_CHECKING:
    from firm.brains.protocol import Session, ToolResult

MIN_COMPLETION = 16  # as in the llm brain: a call that could not even say "done" is not made
CHARS_PER_TOKEN = 4


class EndSession(BaseException):
    """The session is over (complete_task/fail_task ran, or the turn ended after
    delegating, or firm stopped it): unwind the crew without another model call."""


class Cancelled(BaseException):
    """SessionCancelled, carried through CrewAI's `except Exception` handlers."""

    def __init__(self, cause: SessionCancelled):
        super().__init__(cause.reason)
        self.cause = cause


class Turn:
    """The state of one session as seen from inside the crew."""

    def __init__(self, session: Session, *, max_iterations: int):
        self.session = session
        self.max_iterations = max_iterations
        self.calls = 0  # model calls made
        self.reply_results: list[tuple[str, bool]] = []  # the tool calls of the last reply
        self.gave_up: str | None = None

    # --- the model's side ----------------------------------------------------------------

    def before_call(self, prompt_chars: int) -> None:
        """Raise instead of making a model call that firm would throw away."""
        s = self.session
        self.check_cancelled()
        if s.ended:
            raise EndSession
        if (
            s.delegated
            and self.reply_results
            and all(name == "delegate_task" and ok for name, ok in self.reply_results)
        ):
            raise EndSession  # its turn ends; it is woken with the results
        if self.calls >= self.max_iterations:
            self.give_up(
                f"{s.agent_id} reached its limit of {self.max_iterations} model calls in one "
                "session without finishing the task (raise llm.max_iterations in the org "
                "chart or --max-iterations, or narrow the task)"
            )
        remaining = s.tokens_remaining()
        if remaining is not None:
            prompt = -(-prompt_chars // CHARS_PER_TOKEN)
            if remaining - prompt < MIN_COMPLETION:
                budget = s.grant.budget_tokens
                self.give_up(
                    f"budget_exhausted: {s.agent_id} has {remaining} of its {budget} tokens "
                    f"left, and the next model call needs about {prompt} for its prompt alone"
                )
        self.reply_results = []

    def after_call(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        model: str = "",
        seconds: float = 0.0,
        tool_calls: list[str] | None = None,
        cached_tokens: int = 0,
    ) -> None:
        self.calls += 1
        self.session.record_usage(1, prompt_tokens, completion_tokens)
        # The same record of a model call the llm brain writes: the office, `firm show` and
        # traces read it.
        self.session.log(
            EventKind.MODEL_CALL,
            {
                "model": model,
                "call": self.calls,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "cached_tokens": cached_tokens or None,
                "tool_calls": list(tool_calls or []),
                "finish_reason": "tool_calls" if tool_calls else None,
                "seconds": round(seconds, 3),
            },
        )

    def give_up(self, reason: str) -> None:
        """End the session as failed — or, if it delegated, end the turn (its reports' work
        stands and it is woken to try again with their results)."""
        s = self.session
        if s.delegated:
            s.think(f"Ending the turn: {reason}")
        elif not s.ended:
            s.give_up(reason)
        self.gave_up = reason
        raise EndSession

    def check_cancelled(self) -> None:
        try:
            self.session.check_cancelled()
        except SessionCancelled as exc:
            raise Cancelled(exc) from None

    # --- the tools' side -----------------------------------------------------------------

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one tool through the session's checked path; what went wrong is a tool error
        the model reads and can correct."""
        s = self.session
        tool = next((t for t in s.tools() if t.name == name), None)
        if tool is not None:
            # A null for an optional argument means "not given" (CrewAI sends strict schemas,
            # which make models send one): drop it so the tool's own default applies.
            required = set(tool.parameters_schema().get("required", []))
            arguments = {k: v for k, v in arguments.items() if v is not None or k in required}
        try:
            result: ToolResult = s.call(name, arguments)
        except SessionCancelled as exc:
            raise Cancelled(exc) from None
        self.reply_results.append((name, result.ok))
        if s.ended:
            raise EndSession  # complete_task/fail_task ran: nothing after it is needed
        return result.content
