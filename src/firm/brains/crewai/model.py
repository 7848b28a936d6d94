"""The model of one CrewAI session: CrewAI's own OpenAI-compatible LLM, with firm at the door.

Every call CrewAI makes passes `Turn.before_call` first (cancellation, the end of the turn,
the iteration cap, the token budget) and reports its usage to the session after. The HTTP
exchange runs in a helper thread so that a cancelled task never waits behind a slow answer.
"""

from __future__ import annotations

import contextvars
import json
import queue
import threading
import time
from typing import TYPE_CHECKING, Any

from crewai.llms.providers.openai.completion import OpenAICompletion
from pydantic import PrivateAttr

if TYPE_CHECKING:
    from firm.brains.crewai.turn import Turn

POLL = 0.05  # seconds between looks at the in-process cancel signal
STORE_POLL = 1.0  # seconds between looks at the store (a cancel from another process)


class SessionLLM(OpenAICompletion):
    _turn: Turn = PrivateAttr()

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        turn = self._turn
        tools = kwargs.get("tools") if kwargs.get("tools") is not None else None
        turn.before_call(len(json.dumps([messages, tools], default=str)))
        before = dict(self._token_usage)
        started = time.monotonic()
        result = self._in_thread(lambda: super(SessionLLM, self).call(messages, *args, **kwargs))
        after = self._token_usage
        turn.after_call(
            after.get("prompt_tokens", 0) - before.get("prompt_tokens", 0),
            after.get("completion_tokens", 0) - before.get("completion_tokens", 0),
            model=str(self.model),
            seconds=time.monotonic() - started,
            tool_calls=_tool_names(result),
            cached_tokens=after.get("cached_prompt_tokens", 0)
            - before.get("cached_prompt_tokens", 0),
        )
        if isinstance(result, str) and result.strip():
            turn.session.think(result)
        return result

    def _in_thread(self, fn: Any) -> Any:
        box: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)
        context = contextvars.copy_context()  # CrewAI keeps its event context in contextvars

        def work() -> None:
            try:
                box.put((True, context.run(fn)))
            except BaseException as exc:  # handed to the session's thread
                box.put((False, exc))

        threading.Thread(target=work, name="firm-crewai-call", daemon=True).start()
        waited = 0.0
        while True:
            try:
                ok, value = box.get(timeout=POLL)
            except queue.Empty:
                waited += POLL
                session = self._turn.session
                if session.cancel_signalled() or waited >= STORE_POLL:
                    waited = 0.0
                    self._turn.check_cancelled()
                continue
            if ok:
                return value
            raise value


def _tool_names(result: Any) -> list[str]:
    """The tools a reply calls, when CrewAI hands back native tool calls rather than text."""
    if not isinstance(result, list):
        return []
    names: list[str] = []
    for call in result:
        fn = call.get("function") if isinstance(call, dict) else getattr(call, "function", None)
        name = fn.get("name") if isinstance(fn, dict) else getattr(fn, "name", None)
        if isinstance(name, str):
            names.append(name)
    return names
