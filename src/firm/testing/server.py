"""A real HTTP server on loopback that speaks the chat-completions protocol from a script.

    with ModelServer(model) as server:
        firm.run(org, goal, brain="llm", brain_options=server.brain_options())
        print(len(server.requests), server.requests[0].request.system)

It answers `POST …/chat/completions` both streamed (server-sent events, the way OpenAI sends
them: text and tool-call arguments in pieces, usage in a last chunk when asked) and whole,
plus `GET …/models`. Every request is recorded with what was answered and whether the client
went away before the end. Token usage is estimated at four characters a token unless a reply
says otherwise.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from firm.testing.script import ModelRequest, Reply, Responder, ScriptedModel

MODEL_NAME = "scripted"


@dataclass
class RecordedRequest:
    """One request the server received, and what became of it."""

    seq: int
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    started: float
    status: int = 0
    reply: Reply | None = None
    chunks_sent: int = 0
    completed: bool = False
    disconnected: bool = False
    ended: float | None = None
    # The client's address: requests that share one came over one connection.
    peer: tuple[str, int] | None = None

    @property
    def request(self) -> ModelRequest:
        return ModelRequest(self.body, self.headers)

    @property
    def agent(self) -> str | None:
        return self.request.agent


@dataclass
class _State:
    model: ScriptedModel | Responder
    api_key: str | None
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Condition = field(default_factory=threading.Condition)
    closing: threading.Event = field(default_factory=threading.Event)


def _tokens(chars: int) -> int:
    return max(1, math.ceil(chars / 4))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A stream is many small writes: with Nagle's algorithm each waits for the client's
    # delayed ACK of the one before (up to 40 ms a reply on loopback), a delay no hosted
    # API adds and one that would be counted as firm's.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        return

    def parse_request(self) -> bool:
        # Its request line has just been read: a reply's delay counts from here.
        self._arrived = time.monotonic()
        return super().parse_request()

    # --- routing ---------------------------------------------------------------------------

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(
                200,
                {
                    "object": "list",
                    "data": [{"id": MODEL_NAME, "object": "model", "owned_by": "firm"}],
                },
            )
        else:
            self._error(404, f"no route {self.path}", "not_found")

    def do_POST(self) -> None:
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._error(404, f"no route {self.path}", "not_found")
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._error(400, f"the body is not JSON: {exc}", "invalid_json")
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        with state.lock:
            record = RecordedRequest(len(state.requests) + 1, self.path, headers, body, time.time())
            record.peer = self.client_address[:2]
            state.requests.append(record)
            state.lock.notify_all()
        try:
            self._answer(state, record)
        except (TimeoutError, BrokenPipeError, ConnectionResetError):
            record.disconnected = True
            self.close_connection = True
        finally:
            record.ended = time.time()
            with state.lock:
                state.lock.notify_all()

    # --- answering -------------------------------------------------------------------------

    def _answer(self, state: _State, record: RecordedRequest) -> None:
        expected = None if state.api_key is None else f"Bearer {state.api_key}"
        if expected is not None and self.headers.get("Authorization") != expected:
            record.status = 401
            self._error(401, "Incorrect API key provided", "invalid_api_key")
            return
        req = record.request
        model = state.model
        reply = model.answer(req) if isinstance(model, ScriptedModel) else model(req)
        record.reply = reply
        # Encoded before the delay is waited out: inside it, as a remote model's own work is
        # inside its latency.
        answer = self._encoded(record, req, reply)
        if reply.delay and not self._stall(state, record, self._arrived + reply.delay):
            return
        if reply.hang is not None:
            until = None if math.isinf(reply.hang) else time.monotonic() + reply.hang
            if not self._stall(state, record, until):
                return
        if reply.drop:
            self.close_connection = True
            return
        if reply.status != 200:
            record.status = reply.status
            self._error(reply.status, reply.error_message, "scripted", dict(reply.headers))
            return
        record.status = 200
        if req.stream:
            self._stream(state, record, reply, answer)
        else:
            self._send(200, answer[0])
        record.completed = True

    def _stall(self, state: _State, record: RecordedRequest, until: float | None) -> bool:
        """Wait until then (monotonic; None: until the server stops); False, the connection
        given up, if the server stopped first."""
        left = None if until is None else until - time.monotonic()
        if (left is None or left > 0) and state.closing.wait(left):
            record.disconnected = True
            self.close_connection = True
            return False
        return True

    def _encoded(self, record: RecordedRequest, req: ModelRequest, reply: Reply) -> list[bytes]:
        """A 200's body: the streamed events, or the one completion; nothing for the rest."""
        if reply.status != 200 or reply.drop:
            return []
        usage = self._usage(req, reply)
        if not req.stream:
            return [json.dumps(self._completion(record, reply, usage)).encode()]
        include_usage = bool((req.body.get("stream_options") or {}).get("include_usage"))
        return self._events(record, reply, usage if include_usage else None)

    def _usage(self, req: ModelRequest, reply: Reply) -> dict[str, int]:
        if reply.usage is not None:
            prompt, completion = reply.usage
        else:
            prompt = _tokens(len(json.dumps(req.messages)) + len(json.dumps(req.tools)))
            completion = _tokens(
                len(reply.text) + sum(len(c.name) + len(c.arguments) for c in reply.tool_calls)
            )
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _completion(
        self, record: RecordedRequest, reply: Reply, usage: dict[str, int]
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{record.seq}_{i}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for i, c in enumerate(reply.tool_calls)
            ]
        return {
            "id": f"chatcmpl-{record.seq}",
            "object": "chat.completion",
            "created": int(record.started),
            "model": record.body.get("model") or MODEL_NAME,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": reply.finish_reason or _finish(reply),
                }
            ],
            "usage": usage,
        }

    def _chunks(self, record: RecordedRequest, reply: Reply) -> Iterator[dict[str, Any]]:
        size = max(1, reply.chunk_size)
        yield {"role": "assistant", "content": ""}
        for i in range(0, len(reply.text), size):
            yield {"content": reply.text[i : i + size]}
        for index, c in enumerate(reply.tool_calls):
            yield {
                "tool_calls": [
                    {
                        "index": index,
                        "id": f"call_{record.seq}_{index}",
                        "type": "function",
                        "function": {"name": c.name, "arguments": ""},
                    }
                ]
            }
            for i in range(0, len(c.arguments), size * 4):
                piece = c.arguments[i : i + size * 4]
                yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}

    def _events(
        self, record: RecordedRequest, reply: Reply, usage: dict[str, int] | None
    ) -> list[bytes]:
        """The streamed answer's server-sent events, each framed as an HTTP chunk: its deltas,
        then the finish, the usage (when asked for) and [DONE]."""
        base = {
            "id": f"chatcmpl-{record.seq}",
            "object": "chat.completion.chunk",
            "created": int(record.started),
            "model": record.body.get("model") or MODEL_NAME,
        }
        choices: list[list[dict[str, Any]]] = [
            [{"index": 0, "delta": delta, "finish_reason": None}]
            for delta in self._chunks(record, reply)
        ]
        finish = reply.finish_reason or _finish(reply)
        choices.append([{"index": 0, "delta": {}, "finish_reason": finish}])
        payloads = [json.dumps({**base, "choices": c}) for c in choices]
        if usage is not None:
            payloads.append(json.dumps({**base, "choices": [], "usage": usage}))
        payloads.append("[DONE]")
        return [_framed(f"data: {p}\n\n".encode()) for p in payloads]

    def _stream(
        self, state: _State, record: RecordedRequest, reply: Reply, events: list[bytes]
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if not reply.chunk_delay:
            # Nothing to wait for between the events: they go in one write (the client parses
            # the same events; ten small writes cost the server ~1 ms a reply).
            self._sent(state, record, b"".join(events) + _LAST_CHUNK, len(events))
            return
        deltas = sum(1 for _ in self._chunks(record, reply))
        for i, data in enumerate(events):
            if 0 < i < deltas and state.closing.wait(reply.chunk_delay):
                raise BrokenPipeError("the server is stopping")
            self._sent(state, record, data, 1)
        self.wfile.write(_LAST_CHUNK)
        self.wfile.flush()

    def _sent(self, state: _State, record: RecordedRequest, data: bytes, events: int) -> None:
        self.wfile.write(data)
        self.wfile.flush()
        with state.lock:
            record.chunks_sent += events
            state.lock.notify_all()

    # --- plumbing --------------------------------------------------------------------------

    def _json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(value).encode(), headers)

    def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(
        self, status: int, message: str, code: str, headers: dict[str, str] | None = None
    ) -> None:
        kind = "invalid_request_error" if status < 500 else "server_error"
        self._json(status, {"error": {"message": message, "type": kind, "code": code}}, headers)


_LAST_CHUNK = b"0\r\n\r\n"  # the end of a chunked body


def _framed(data: bytes) -> bytes:
    return f"{len(data):X}\r\n".encode() + data + b"\r\n"


def _finish(reply: Reply) -> str:
    return "tool_calls" if reply.tool_calls else "stop"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], state: _State):
        self.state = state
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that closes an idle keep-alive connection is normal, not worth a traceback.
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class ModelServer:
    """The scripted model behind a real chat-completions HTTP endpoint on 127.0.0.1."""

    def __init__(
        self,
        model: ScriptedModel | Responder | None = None,
        *,
        api_key: str | None = None,
        port: int = 0,
    ):
        self.model = model if model is not None else ScriptedModel()
        self._state = _State(self.model, api_key)
        self._server = _Server(("127.0.0.1", port), self._state)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL to give a client: http://127.0.0.1:PORT/v1."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> ModelServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="firm-model-server",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; stalled answers are released and their connections closed."""
        self._state.closing.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what happened ---------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    def requests_for(self, agent: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.agent == agent]

    def wait_for_requests(self, count: int, timeout: float = 60.0) -> bool:
        """Block until at least `count` requests have arrived (or timeout); True if they have.
        The default timeout only bounds a hang: a loaded machine can take seconds to start a
        session and make its first call."""
        with self._state.lock:
            return self._state.lock.wait_for(lambda: len(self._state.requests) >= count, timeout)

    def wait_until(self, predicate: Any, timeout: float = 60.0) -> bool:
        """Block until predicate(requests) holds; re-checked whenever a request arrives,
        streams a chunk or ends."""
        with self._state.lock:
            return self._state.lock.wait_for(lambda: predicate(list(self._state.requests)), timeout)

    # --- how to point firm at it -----------------------------------------------------------

    def brain_options(self, **overrides: Any) -> dict[str, Any]:
        """Options for brain="llm" that call this server, with quick retries."""
        return brain_options(self.url, **overrides)

    def env(self) -> dict[str, str]:
        """Environment variables that point `firm run --brain llm` at this server."""
        return {
            "OPENAI_BASE_URL": self.url,
            "OPENAI_API_KEY": self._state.api_key or "firm-testing",
            "FIRM_MODEL": MODEL_NAME,
        }


def brain_options(url: str, **overrides: Any) -> dict[str, Any]:
    """Options for brain="llm" that call a scripted server at `url`, with quick retries."""
    options: dict[str, Any] = {
        "model": MODEL_NAME,
        "base_url": url,
        "timeout": 10.0,
        "backoff": 0.01,
        "backoff_max": 0.05,
    }
    options.update(overrides)
    return options
