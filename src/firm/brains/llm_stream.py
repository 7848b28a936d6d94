"""A streamed chat completion read as what it is on the wire: server-sent events whose data
are JSON objects, up to `data: [DONE]`.

The openai client would build a pydantic model of every chunk (a third of a streamed call's
CPU here, with its request's own transformation); the reply is assembled from plain dicts
instead (llm_client._ReplyBuilder). What the client did besides is kept: an `error` object
in the stream is its APIError, and a stream that breaks off or times out is its
APIConnectionError or APITimeoutError, so that llm_client.classify retries them as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai

from firm.brains.llm_http import HTTPX


def sse_chunks(response: Any) -> Iterator[dict[str, Any]]:
    """The JSON objects of a response's event stream, until `[DONE]` or the body's end."""
    try:
        data: list[str] = []
        for line in response.iter_lines():
            if line:
                field, _, value = line.partition(":")
                if field == "data":
                    data.append(value[1:] if value.startswith(" ") else value)
                continue  # another field (event, id, retry) or a comment
            if not data:
                continue
            payload, data = "\n".join(data), []
            if payload.startswith("[DONE]"):
                return
            yield _chunk(payload, response)
        if data and not data[0].startswith("[DONE]"):
            yield _chunk("\n".join(data), response)
    except HTTPX.TimeoutException as exc:
        raise openai.APITimeoutError(request=response.request) from exc
    except HTTPX.RequestError as exc:
        raise openai.APIConnectionError(request=response.request) from exc


def _chunk(payload: str, response: Any) -> dict[str, Any]:
    chunk = json.loads(payload)
    if not isinstance(chunk, dict):
        raise ValueError(f"a streamed chunk that is not a JSON object: {payload[:200]!r}")
    error = chunk.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message:
            message = "An error occurred during streaming"
        raise openai.APIError(message, request=response.request, body=error)
    return chunk
