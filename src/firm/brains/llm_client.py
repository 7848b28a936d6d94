"""One model call over the chat-completions protocol: streamed, retried, cancellable.

Every call goes through `ModelClient.complete`, the one place where transient errors (429,
5xx, timeouts, dropped connections) are retried with a bounded, jittered backoff and where
permanent ones (a bad key, an unknown model, a rejected request) become a `ModelCallError`
whose message says what to fix. The openai client's own retries are off, so the two never
stack up.

The HTTP exchange runs in a helper thread that feeds a queue; the session's thread reads the
queue and checks for cancellation while it waits, so a cancelled task (or a stopping worker)
never sits behind a hung connection or a long streamed answer. The helper is one of the
process's idle threads (firm/idlethreads.py), not a thread started for the call.
"""

from __future__ import annotations

import contextlib
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import openai
from openai.types.chat import ChatCompletion

from firm import idlethreads
from firm.brains.llm_http import HTTPX, finish, shared_pool
from firm.brains.llm_stream import sse_chunks
from firm.brains.protocol import SessionCancelled

if TYPE_CHECKING:
    from firm.brains.protocol import Session

POLL = 0.05  # seconds between looks at the cancel signal while waiting for the model
STORE_POLL = 1.0  # seconds between looks at the store (cancellation from another process)
# What the openai client hands back, unread, when asked for its HTTP library's own response.
_RAW: type[Any] = HTTPX.Response


class ModelCallError(Exception):
    """A model call that failed for good: the message is for the task's reason and the user."""

    def __init__(
        self,
        message: str,
        *,
        transient: bool,
        retry_after: float | None = None,
        status: int | None = None,
        provider_message: str | None = None,
    ):
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after
        self.status = status  # the HTTP status the API answered, when it answered one
        self.provider_message = provider_message


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    estimated: bool = False


@dataclass
class Reply:
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None


@dataclass(frozen=True)
class Endpoint:
    """Where and how to call: everything that shapes the HTTP client."""

    base_url: str | None
    api_key: str = field(repr=False)
    api_key_env: str
    timeout: float


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    backoff: float = 1.0
    backoff_max: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.backoff_max)
        ceiling = min(self.backoff_max, self.backoff * (2**attempt))
        return random.uniform(ceiling / 2, ceiling)  # jitter: parallel sessions spread out


def _provider_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(exc.message)


def _retry_after(exc: openai.APIStatusError) -> float | None:
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return float(value) * scale
            except ValueError:
                return None  # an HTTP date: fall back to our own backoff
    return None


def classify(exc: BaseException, endpoint: Endpoint, model: str) -> ModelCallError:
    """Turn whatever the client raised into a transient or a permanent ModelCallError."""
    where = endpoint.base_url or "the OpenAI API"
    if isinstance(exc, ModelCallError):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        return ModelCallError(
            f"the model API at {where} did not answer within {endpoint.timeout:g}s",
            transient=True,
        )
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return ModelCallError(f"cannot reach the model API at {where}: {cause}", transient=True)
    if isinstance(exc, openai.APIStatusError):
        code, message = exc.status_code, _provider_message(exc)
        if code in (408, 409, 429) or code >= 500:
            return ModelCallError(
                f"the model API answered {code}: {message}",
                transient=True,
                retry_after=_retry_after(exc),
            )
        if code in (401, 403):
            return ModelCallError(
                f"the model API at {where} refused the key ({code}: {message}); "
                f"set {endpoint.api_key_env} to a valid key",
                transient=False,
            )
        if code == 404:
            return ModelCallError(
                f"the model {model!r} was not found at {where} ({code}: {message}); "
                "check --model, llm.model in the org chart, or FIRM_MODEL",
                transient=False,
            )
        return ModelCallError(
            f"the model API at {where} rejected the request ({code}: {message})",
            transient=False,
            status=code,
            provider_message=message,
        )
    if isinstance(exc, openai.APIError):  # e.g. an error event in the middle of a stream
        return ModelCallError(f"the model API failed: {exc.message}", transient=True)
    return ModelCallError(f"the model call failed: {type(exc).__name__}: {exc}", transient=False)


class _Canceller:
    """Cheap cancellation checks for a tight loop: the signal every time, the store now and
    then (a task cancelled by another process shows up only there)."""

    def __init__(self, session: Session):
        self.session = session
        self.next_store_check = time.monotonic() + STORE_POLL

    def check(self) -> None:
        if self.session.cancel_signalled():
            self.session.check_cancelled()
        now = time.monotonic()
        if now >= self.next_store_check:
            self.next_store_check = now + STORE_POLL
            self.session.check_cancelled()


class ModelClient:
    """Calls one endpoint; thread-safe (the openai client is), shared by sessions. Its
    connections are the process's pool (llm_http.py), which outlives it."""

    def __init__(self, endpoint: Endpoint, retry: RetryPolicy):
        self.endpoint = endpoint
        self.retry = retry
        self._client = openai.OpenAI(
            api_key=endpoint.api_key,
            base_url=endpoint.base_url,
            timeout=endpoint.timeout,
            max_retries=0,  # retried here, in one place
            http_client=shared_pool(),
        )

    def close(self) -> None:
        """Nothing to close: the connection pool is the process's, shared with other runs."""

    def complete(
        self,
        session: Session,
        request: dict[str, Any],
        *,
        stream: bool,
        on_text: Callable[[str], None],
        on_retry: Callable[[int, float, ModelCallError], None],
    ) -> Reply:
        """One model reply, retrying transient failures; raises ModelCallError or
        SessionCancelled."""
        attempt = 0
        while True:
            session.check_cancelled()
            try:
                return self._once(session, request, stream=stream, on_text=on_text)
            except SessionCancelled:
                raise
            except Exception as exc:
                err = classify(exc, self.endpoint, str(request.get("model")))
                if not err.transient:
                    raise err from None
                if attempt >= self.retry.max_retries:
                    tries = attempt + 1
                    raise ModelCallError(
                        f"{err} (gave up after {tries} attempt{'s' if tries > 1 else ''})",
                        transient=True,
                    ) from None
                delay = self.retry.delay(attempt, err.retry_after)
                on_retry(attempt + 1, delay, err)
                session.sleep(delay)
                attempt += 1

    def _once(
        self,
        session: Session,
        request: dict[str, Any],
        *,
        stream: bool,
        on_text: Callable[[str], None],
    ) -> Reply:
        items: queue.Queue[tuple[str, Any]] = queue.Queue()
        stop = threading.Event()
        released = threading.Event()  # the reply's connection is back in the pool, or dropped
        opened: list[Any] = []

        def produce() -> None:
            try:
                # Posted as firm built it, not through chat.completions.create, whose check of
                # the request against its typed parameters (1.1-1.3 ms a call here) returns
                # the same JSON.
                body, options = _body_and_options(request)
                if not stream:
                    whole = self._client.post(
                        "/chat/completions", cast_to=ChatCompletion, body=body, options=options
                    )
                    items.put(("whole", whole))
                    return
                # The raw stream, its chunks read as plain JSON (llm_stream.py): the openai
                # client would build a pydantic model of each.
                response = self._client.post(
                    "/chat/completions",
                    cast_to=_RAW,
                    body={**body, "stream": True, "stream_options": {"include_usage": True}},
                    options=options,
                    stream=True,
                    stream_cls=openai.Stream[Any],
                )
                opened.append(response)
                with contextlib.closing(response):
                    for chunk in sse_chunks(response):
                        if stop.is_set():
                            return
                        items.put(("chunk", chunk))
                items.put(("end", None))
            except BaseException as exc:  # handed to the session's thread to classify
                items.put(("error", exc))
            finally:
                for stream_opened in opened:  # the reply is in: keep its connection
                    finish(stream_opened)
                released.set()

        idlethreads.run(produce, "firm-model-call")
        canceller = _Canceller(session)
        builder = _ReplyBuilder(on_text)
        try:
            while True:
                try:
                    kind, item = items.get(timeout=POLL)
                except queue.Empty:
                    canceller.check()
                    continue
                if kind == "error":
                    raise item
                if kind == "whole":
                    return _whole_reply(item, on_text)
                if kind == "end":
                    # The body's last bytes are read (finish) just after the end is handed
                    # here: on a loaded machine this thread could act on the reply and the
                    # next model call start before that, and open a new connection. A server
                    # that never ends its body holds the reply back no longer than this.
                    released.wait(RELEASE_WAIT)
                    return builder.reply()
                builder.add(item)
                canceller.check()
        except SessionCancelled:
            stop.set()
            for response in opened:  # the server sees the connection close and stops too
                with contextlib.suppress(Exception):
                    response.close()
            raise


RELEASE_WAIT = 0.5  # seconds a streamed reply waits for its connection to go back to the pool


def _body_and_options(request: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """A request as chat.completions.create takes it, split as the client's post does: the
    JSON body, and the options create would have made of its extra_* and timeout keys."""
    body = {k: v for k, v in request.items() if k not in _OPTIONS}
    body.update(request.get("extra_body") or {})
    options: dict[str, Any] = {}
    if request.get("extra_headers"):
        options["headers"] = request["extra_headers"]
    if request.get("extra_query"):
        options["params"] = request["extra_query"]
    if "timeout" in request:
        options["timeout"] = request["timeout"]
    return body, options


_OPTIONS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})


class _ReplyBuilder:
    """Assembles streamed chunks (JSON objects) into a Reply, passing text on as it arrives."""

    def __init__(self, on_text: Callable[[str], None]):
        self.on_text = on_text
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, ToolCall] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None

    def add(self, chunk: dict[str, Any]) -> None:
        if isinstance(chunk.get("usage"), dict):
            self.usage = _usage(chunk["usage"])
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or (choice.get("index") or 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                # Reasoning models served by vLLM and others stream their thinking here.
                thinking = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(thinking, str) and thinking:
                    self.reasoning.append(thinking)
                content = delta.get("content")
                if content:
                    self.text.append(content)
                    self.on_text(content)
                for tc in delta.get("tool_calls") or []:
                    if isinstance(tc, dict):
                        self._add_call(tc)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def _add_call(self, tc: dict[str, Any]) -> None:
        call = self.calls.setdefault(self._slot(tc), ToolCall("", "", ""))
        if tc.get("id") and not call.id:
            call.id = tc["id"]
        function = tc.get("function")
        if isinstance(function, dict):
            if function.get("name") and not call.name:
                call.name = function["name"]
            if function.get("arguments"):
                call.arguments += function["arguments"]

    def _slot(self, tc: dict[str, Any]) -> int:
        index = tc.get("index")
        if isinstance(index, int):
            return index
        # A server that leaves the index out sends each call whole: a new id is a new call.
        ident = tc.get("id")
        if not self.calls or (ident and ident != self.calls[max(self.calls)].id):
            return len(self.calls)
        return max(self.calls)

    def reply(self) -> Reply:
        calls = [self.calls[i] for i in sorted(self.calls)]
        return Reply(
            text="".join(self.text),
            reasoning="".join(self.reasoning),
            tool_calls=_with_ids(calls),
            finish_reason=self.finish_reason,
            usage=self.usage,
        )


def _usage(u: Any) -> Usage:
    """Token counts from a whole reply's usage (an object) or a streamed one's (a dict)."""
    details = _field(u, "prompt_tokens_details")
    cached = _field(details, "cached_tokens") if details is not None else 0
    prompt, completion = _field(u, "prompt_tokens"), _field(u, "completion_tokens")
    return Usage(int(prompt or 0), int(completion or 0), int(cached or 0))


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def _with_ids(calls: list[ToolCall]) -> list[ToolCall]:
    # Some local servers leave ids out; the protocol needs one to pair each result with its call.
    for i, call in enumerate(calls):
        if not call.id:
            call.id = f"call_{i}"
    return calls


def _whole_reply(completion: Any, on_text: Callable[[str], None]) -> Reply:
    if not completion.choices:
        return Reply(usage=_usage(completion.usage) if completion.usage else None)
    choice = completion.choices[0]
    message = choice.message
    text = message.content or ""
    if text:
        on_text(text)
    thinking = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    calls = [
        ToolCall(tc.id or "", tc.function.name or "", tc.function.arguments or "")
        for tc in (message.tool_calls or [])
        if getattr(tc, "function", None) is not None
    ]
    return Reply(
        text=text,
        reasoning=thinking if isinstance(thinking, str) else "",
        tool_calls=_with_ids(calls),
        finish_reason=choice.finish_reason,
        usage=_usage(completion.usage) if completion.usage else None,
    )
