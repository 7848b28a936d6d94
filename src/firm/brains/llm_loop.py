"""The tool-calling loop of one session: prompt, call, run the tools, feed back, until done.

No model call is wasted: a reply whose tool calls end the task (complete_task, fail_task)
ends the session once they have run, and a reply that only delegates ends the turn as soon
as the subtasks exist — the model was told it will be called again with their results.
Everything the model gets wrong comes back to it as a tool error or a correction; only the
iteration cap, the token budget or a model API that fails for good end the task as failed.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from firm.brains.llm_client import ModelCallError, ModelClient, Reply, Usage
from firm.brains.llm_prompt import drop_null_optionals, system_prompt, tool_specs
from firm.brains.protocol import SessionCancelled, ToolResult
from firm.events import EventKind

if TYPE_CHECKING:
    from firm.brains.protocol import Session
    from firm.tools.registry import ToolDef

# Checks a final answer: None accepts it; a message sends it back to the model to correct.
AnswerCheck = Callable[[str], str | None]

CHARS_PER_TOKEN = 4  # a rough estimate, used only where the provider reports no usage
MIN_COMPLETION = 16  # a call that could not even say "done" is not worth making
THOUGHT_CHUNK = 400  # stream text into the activity log in paragraphs of about this size

EMPTY_REPLY = (
    "Your reply had no text and no tool calls. Continue the task: call the tools you need, "
    "and finish with complete_task (or fail_task)."
)
CUT_OFF = (
    "Your reply was cut off at the output token limit and no tool was called. Be brief: "
    "put long content in files with files_write, then finish with complete_task."
)


@dataclass(frozen=True)
class LoopSettings:
    """Everything the loop needs to know about the model of one agent."""

    model: str
    temperature: float | None
    max_iterations: int
    max_tokens: int | None
    max_tokens_param: str
    stream: bool
    strict_tools: bool


def _chars(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False))


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


class _Thoughts:
    """Passes the model's text on to the activity log a paragraph at a time, and to live
    watchers as it arrives."""

    def __init__(self, session: Session):
        self.session = session
        self.buffer = ""

    def feed(self, delta: str) -> None:
        self.buffer += delta
        if len(self.buffer) >= THOUGHT_CHUNK:
            cut = self.buffer.rfind("\n\n")
            if cut <= 0 and len(self.buffer) >= 5 * THOUGHT_CHUNK:
                cut = self.buffer.rfind(" ")  # one endless paragraph: cut between words
            if cut > 0:
                self.session.think(self.buffer[:cut])
                self.buffer = self.buffer[cut:].lstrip()
        # Watchers see the paragraph as it is written; the log gets it when it is whole.
        self.session.stream(self.buffer)

    def flush(self) -> None:
        if self.buffer.strip():
            self.session.think(self.buffer)  # watchers drop the stream when this lands
        elif self.buffer:
            self.session.stream("")
        self.buffer = ""


class SessionLoop:
    """The loop of one session. A caller with its own protocol (a team's manager turn, say)
    may replace the system prompt and the brief, offer only some tools, ask for a response
    format, and check each final answer: a check that returns a message sends the answer back
    to the model with that message, as the next user turn."""

    def __init__(
        self,
        session: Session,
        settings: LoopSettings,
        client: ModelClient,
        *,
        system: str | None = None,
        tools: list[ToolDef] | None = None,
        response_format: dict[str, Any] | None = None,
        check_answer: AnswerCheck | None = None,
        brief: str | None = None,
    ):
        self.session = session
        self.settings = settings
        self.client = client
        self.system = system
        self.only_tools = tools
        self.response_format = response_format
        self.check_answer = check_answer
        self.brief = brief
        self.thoughts = _Thoughts(session)
        self.calls = 0
        self.last_tokens = 0  # prompt + completion of the last call: the next prompt's floor
        self.chars_at_last_call = 0

    # --- the loop --------------------------------------------------------------------------

    def run(self) -> str | None:
        s, cfg = self.session, self.settings
        tools = s.tools() if self.only_tools is None else self.only_tools
        request: dict[str, Any] = {"model": cfg.model}
        specs = tool_specs(tools, strict=cfg.strict_tools)
        if specs:
            request["tools"] = specs
        if cfg.temperature is not None:
            request["temperature"] = cfg.temperature
        if self.response_format is not None:
            request["response_format"] = self.response_format
        request["extra_headers"] = {"X-Firm-Agent": s.agent_id, "X-Firm-Task": s.task_id}
        system = self.system if self.system is not None else system_prompt(s.org, s.agent_id, tools)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": s.brief if self.brief is None else self.brief},
        ]
        tools_chars = _chars(specs)
        offered = {t.name for t in tools}

        for _ in range(cfg.max_iterations):
            prompt_chars = _chars(messages) + tools_chars
            cap = self._completion_cap(prompt_chars)
            if isinstance(cap, str):
                self._give_up(cap)
                return None
            if cap is not None:
                request[cfg.max_tokens_param] = cap
            reply = self._call({**request, "messages": messages}, prompt_chars)
            if reply is None:
                return None  # the session has ended (the model API failed for good)
            if not reply.tool_calls:
                if reply.text.strip() and reply.finish_reason != "length":
                    check = self.check_answer
                    correction = None if check is None else check(reply.text)
                    if s.ended:
                        return None  # the check ended the session (it gave up on the answers)
                    if correction is None:
                        return reply.text  # its result, or the end of its turn after delegating
                    messages.append({"role": "assistant", "content": reply.text})
                    messages.append({"role": "user", "content": correction})
                    continue
                if s.delegated and reply.finish_reason != "length":
                    return None
                messages.append({"role": "assistant", "content": reply.text or ""})
                messages.append(
                    {"role": "user", "content": CUT_OFF if reply.text.strip() else EMPTY_REPLY}
                )
                continue
            messages.append(_assistant_message(reply))
            all_ok, only_delegation = True, True
            # The reply's delegations are written in one transaction: its reports start together.
            with s.batch_delegations() as batch:
                for call in reply.tool_calls:
                    tool = s.find_tool(call.name)
                    if self.only_tools is not None and (tool is None or tool.name not in offered):
                        result = self._not_offered(call.name, tools)
                    else:
                        result = s.call(call.name, drop_null_optionals(tool, call.arguments))
                    messages.append(
                        {"role": "tool", "tool_call_id": call.id, "content": str(result)}
                    )
                    all_ok &= result.ok
                    only_delegation &= tool is not None and tool.name == "delegate_task"
                ends_turn = all_ok and only_delegation and bool(s.delegated)
                if ends_turn:
                    batch.end_turn()  # written with the subtasks, in their transaction
            if s.ended or ends_turn:
                return None  # its turn ends; it is called again with the results

        if s.delegated:
            s.think(
                f"Reached the limit of {cfg.max_iterations} model calls for this session; "
                "ending the turn with the subtasks already delegated."
            )
            return None
        self._give_up(
            f"{s.agent_id} reached its limit of {cfg.max_iterations} model calls in one "
            "session without finishing the task (raise llm.max_iterations in the org chart "
            "or --max-iterations, or narrow the task)"
        )
        return None

    def _not_offered(self, name: str, tools: list[ToolDef]) -> ToolResult:
        """A call to a tool this loop does not offer (a lifecycle tool the caller handles
        itself, say): refused like an unknown tool, so the model sees what it may call."""
        s = self.session
        names = ", ".join(sorted(t.model_name for t in tools)) or "none"
        message = f"there is no tool {name!r} here (available: {names})"
        s.log(EventKind.TOOL_ERROR, {"tool": name[:200], "error": message})
        return ToolResult(False, f"error: {message}")

    # --- one call --------------------------------------------------------------------------

    def _call(self, request: dict[str, Any], prompt_chars: int) -> Reply | None:
        s = self.session
        started = time.monotonic()
        try:
            reply = self.client.complete(
                s,
                request,
                stream=self.settings.stream,
                on_text=self.thoughts.feed,
                on_retry=self._on_retry,
            )
        except SessionCancelled:
            self.thoughts.flush()  # what it said before the cancel belongs in the log
            raise
        except ModelCallError as err:
            self.thoughts.flush()
            s.log(EventKind.MODEL_ERROR, {"error": str(err)})
            self._give_up(str(err))
            return None
        # The reply's entries (its text, its reasoning, the call's record) ride the session's
        # next write — its tool calls', its settle — instead of a transaction each.
        with s.owing():
            self.thoughts.flush()
            if reply.reasoning.strip():
                s.think(reply.reasoning)
        usage = reply.usage or Usage(
            _tokens(prompt_chars),
            _tokens(len(reply.text) + sum(_chars(c.arguments) for c in reply.tool_calls)),
            estimated=True,
        )
        self.calls += 1
        self.last_tokens = usage.prompt_tokens + usage.completion_tokens
        self.chars_at_last_call = prompt_chars
        s.record_usage(1, usage.prompt_tokens, usage.completion_tokens)
        data: dict[str, Any] = {
            "model": self.settings.model,
            "call": self.calls,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cached_tokens": usage.cached_tokens,
            "tool_calls": [c.name for c in reply.tool_calls],
            "finish_reason": reply.finish_reason,
            "seconds": round(time.monotonic() - started, 3),
        }
        if usage.estimated:
            data["estimated"] = True
        with s.owing():
            s.log(EventKind.MODEL_CALL, data)
        return reply

    def _on_retry(self, attempt: int, delay: float, err: ModelCallError) -> None:
        s = self.session
        s.log(
            EventKind.MODEL_RETRY,
            {"attempt": attempt, "delay": round(delay, 3), "error": str(err)[:500]},
        )

    # --- budget and endings ----------------------------------------------------------------

    def _completion_cap(self, prompt_chars: int) -> int | str | None:
        """The output cap for the next call, or the reason it must not be made."""
        configured = self.settings.max_tokens
        remaining = self.session.tokens_remaining()
        if remaining is None:
            return configured
        if self.calls:
            prompt = self.last_tokens + _tokens(max(0, prompt_chars - self.chars_at_last_call))
        else:
            prompt = _tokens(prompt_chars)
        room = remaining - prompt
        if room < MIN_COMPLETION:
            budget = (self.session.task.grant or {}).get("budget_tokens")
            return (
                f"budget_exhausted: {self.session.agent_id} has {remaining} of its "
                f"{budget} tokens left, and the next model call needs about {prompt} "
                "for its prompt alone"
            )
        return room if configured is None else min(configured, room)

    def _give_up(self, reason: str) -> None:
        """End the session as failed — or, if it delegated, end the turn (its reports'
        work stands and it will be woken to try again with their results)."""
        s = self.session
        if s.ended:
            return None
        if s.delegated:
            s.think(f"Ending the turn: {reason}")
            return None
        s.give_up(reason)
        return None


def _assistant_message(reply: Reply) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": reply.text or None,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in reply.tool_calls
        ],
    }
