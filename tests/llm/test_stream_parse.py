"""A streamed reply read as the server sent it: events, their JSON, an error in the stream,
and the reply assembled from the pieces (text, thinking, tool calls, cached tokens)."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from firm.brains.llm_client import Endpoint, _ReplyBuilder, classify
from firm.brains.llm_http import HTTPX
from firm.brains.llm_stream import sse_chunks


def response(body: str) -> Any:
    request = HTTPX.Request("POST", "http://127.0.0.1/v1/chat/completions")
    return HTTPX.Response(200, content=body.encode(), request=request)


def event(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj)}\n\n"


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def test_a_stream_is_assembled_from_its_events() -> None:
    body = (
        ": a comment the server sends to keep the connection\n\n"
        + event(delta(role="assistant", reasoning_content="Think first. "))
        + event(delta(content="Hello"))
        + event(delta(content=", world"))
        + event(delta(tool_calls=[{"index": 0, "id": "c1", "function": {"name": "files.write"}}]))
        + event(delta(tool_calls=[{"index": 0, "function": {"arguments": '{"path":'}}]))
        + event(delta(tool_calls=[{"index": 0, "function": {"arguments": ' "a.md"}'}}]))
        + event({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
        + event(
            {
                "choices": [],
                "usage": {
                    "prompt_tokens": 120,
                    "completion_tokens": 9,
                    "prompt_tokens_details": {"cached_tokens": 100},
                },
            }
        )
        + "data: [DONE]\n\n"
    )
    said: list[str] = []
    builder = _ReplyBuilder(said.append)
    for chunk in sse_chunks(response(body)):
        builder.add(chunk)
    reply = builder.reply()
    assert reply.text == "Hello, world" and said == ["Hello", ", world"]
    assert reply.reasoning == "Think first. "
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("c1", "files.write", '{"path": "a.md"}')
    ]
    assert reply.finish_reason == "tool_calls"
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (120, 9)
    assert reply.usage.cached_tokens == 100


def test_an_event_split_over_data_lines_is_one_object_and_nothing_after_done_counts() -> None:
    body = 'data: {"choices":\ndata: []}\n\n' + "data: [DONE]\n\n" + event(delta(content="late"))
    assert list(sse_chunks(response(body))) == [{"choices": []}]


def test_an_error_in_the_stream_is_a_transient_api_error() -> None:
    body = event(delta(content="Hel")) + event({"error": {"message": "overloaded"}})
    chunks = sse_chunks(response(body))
    next(chunks)
    with pytest.raises(openai.APIError) as caught:
        next(chunks)
    err = classify(caught.value, Endpoint(None, "k", "OPENAI_API_KEY", 10.0), "m")
    assert err.transient and "overloaded" in str(err)
