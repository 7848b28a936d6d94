"""How the manager's answer is requested, and what happens when a provider will not take it.

A manager turn asks for its decision with the strictest response format the provider
accepts: a strict JSON schema, else JSON mode (`json_object`), else plain text with the
schema described in the prompt. Many OpenAI-compatible servers reject `json_schema` (or any
`response_format`) with a 400; rather than fail the run at turn 1, the turn's model call is
made again one level down, the downgrade goes into the activity log as a
`manager_output_downgraded` event on the turn, and later turns (in this process or a resumed
one) start at the level the log says — the store is the memory, as for everything else.
firm judges the answer the same way whatever the server enforces.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from firm.brains.llm_client import ModelCallError, ModelClient, Reply
from firm.teams.decision import response_format
from firm.teams.spec import DOWNGRADED, MANAGER_OUTPUTS

MODES = MANAGER_OUTPUTS

if TYPE_CHECKING:
    from firm.brains.protocol import Session
    from firm.teams.spec import TeamSpec

_ABOUT_FORMAT = (
    "response_format",
    "response format",
    "json_schema",
    "json schema",
    "json_object",
    "json mode",
    "structured output",
)


def weaker(mode: str) -> str | None:
    """The next format to try when `mode` is refused; None after plain text."""
    i = MODES.index(mode)
    return MODES[i + 1] if i + 1 < len(MODES) else None


def rejects_format(err: ModelCallError) -> bool:
    """True for a permanent 400 (or 422) whose message is about the response format."""
    if err.transient or err.status not in (400, 422):
        return False
    message = (err.provider_message or str(err)).casefold()
    return any(word in message for word in _ABOUT_FORMAT)


def mode_in_effect(session: Session, spec: TeamSpec, turn_ids: Iterable[str]) -> str:
    """The format this run asks for now: the team's setting, lowered by every downgrade an
    earlier turn (or an interrupted session of this one) logged."""
    mode = spec.manager_output
    ids = list(turn_ids)
    if not ids:
        return mode
    if ids == [session.task_id] and session.task.attempts <= 1:
        # The run's first turn in its first session (one claim): no turn before it, and no
        # earlier session of this one, can have logged a downgrade. Not read: the log read
        # was ~0.3 ms on the way to a run's first model call.
        return mode
    for e in session.events_of(ids, kinds=[DOWNGRADED]):
        if e.data.get("to") in MODES:
            mode = max(mode, e.data["to"], key=MODES.index)
    return mode


class FormatFallbackClient(ModelClient):
    """A model client for one manager turn that shapes each request for the current format
    and, when the provider rejects that format, logs the downgrade and asks again.

    It calls through `shared`, the LLM brain's client for the endpoint (and so through the
    process's connection pool, llm_http.py)."""

    def __init__(
        self,
        shared: ModelClient,
        *,
        mode: str,
        system_for: Callable[[str], str],
        turn: int | None,
    ):
        self.endpoint = shared.endpoint
        self.retry = shared.retry
        self._client = shared._client
        self.mode = mode
        self.system_for = system_for
        self.turn = turn

    def shape(self, request: dict[str, Any]) -> dict[str, Any]:
        shaped = dict(request)
        fmt = response_format(self.mode)
        if fmt is None:
            shaped.pop("response_format", None)
        else:
            shaped["response_format"] = fmt
        messages = list(shaped.get("messages") or [])
        if messages and messages[0].get("role") == "system":
            messages[0] = {"role": "system", "content": self.system_for(self.mode)}
            shaped["messages"] = messages
        return shaped

    def complete(self, session: Session, request: dict[str, Any], **options: Any) -> Reply:
        while True:
            try:
                return super().complete(session, self.shape(request), **options)
            except ModelCallError as err:
                lower = weaker(self.mode)
                if lower is None or not rejects_format(err):
                    raise
                data = {"turn": self.turn, "from": self.mode, "to": lower, "error": str(err)[:500]}
                session.log(DOWNGRADED, data)
                self.mode = lower
