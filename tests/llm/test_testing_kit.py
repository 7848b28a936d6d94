"""firm.testing itself: the scripted model speaks the protocol the official client expects."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from firm.testing import (
    ModelRequest,
    ModelServer,
    Reply,
    ScriptedModel,
    call,
    calls,
    error,
    text,
)
from firm.testing.serve import ServerProcess

MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Task T-1: hi"}]


@pytest.fixture
def client(server: ModelServer) -> Iterator[openai.OpenAI]:
    c = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
    yield c
    c.close()


def test_tool_calls_whole_and_streamed(
    model: ScriptedModel, server: ModelServer, client: openai.OpenAI
) -> None:
    long_args = "x" * 500
    reply = calls(call("files_write", path="a.md", content=long_args), text="Writing it.")
    model.when().always(reply)

    whole = client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    message = whole.choices[0].message
    assert message.content == "Writing it."
    assert message.tool_calls and message.tool_calls[0].function.name == "files_write"
    assert json.loads(message.tool_calls[0].function.arguments)["content"] == long_args
    assert whole.choices[0].finish_reason == "tool_calls"
    assert whole.usage and whole.usage.prompt_tokens > 0

    stream = client.chat.completions.create(
        model="m",
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    content, arguments, usage = "", "", None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                if tc.function is not None:
                    arguments += tc.function.arguments or ""
    assert content == "Writing it."
    assert json.loads(arguments)["content"] == long_args
    assert usage is not None and usage.completion_tokens > 0
    assert server.requests[1].chunks_sent > 10  # it really came in pieces


def test_rules_answer_in_order_then_fall_through(
    model: ScriptedModel, server: ModelServer, client: openai.OpenAI
) -> None:
    model.when(brief_contains="hi").reply(text("one"), text("two"))
    model.when().always(lambda req: text(f"echo {req.task_title}"))
    answers = [
        client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content  # type: ignore[arg-type]
        for _ in range(3)
    ]
    assert answers == ["one", "two", "echo hi"]
    assert [r.body["model"] for r in server.requests] == ["m", "m", "m"]
    assert model.unused() == []


def test_an_unscripted_request_is_a_clear_400(server: ModelServer, client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="no rule answers agent None at step 0"):
        client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]


def test_errors_carry_retry_after(
    model: ScriptedModel, server: ModelServer, client: openai.OpenAI
) -> None:
    model.when().reply(error(429, "slow down", retry_after=2.5))
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert caught.value.response.headers["retry-after-ms"] == "2500"
    assert "slow down" in str(caught.value)


def test_models_endpoint(server: ModelServer) -> None:
    with urllib.request.urlopen(server.url + "/models", timeout=5) as response:
        assert json.load(response)["data"][0]["id"] == "scripted"


def test_a_plain_function_can_be_the_model() -> None:
    seen: list[ModelRequest] = []

    def model(req: ModelRequest) -> Reply:
        seen.append(req)
        return text(f"{len(req.messages)} messages")

    with ModelServer(model) as server:
        c = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
        answer = c.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
        c.close()
    assert answer.choices[0].message.content == "2 messages"
    assert seen[0].brief == "Task T-1: hi" and seen[0].system == "sys"


def test_a_delayed_reply_comes_its_delay_after_the_request_whole(
    model: ScriptedModel, server: ModelServer, client: openai.OpenAI
) -> None:
    # A remote model's latency includes its own work: the delay counts from the request's
    # arrival, not from when the rule chose the answer.
    model.when().always(text("Slow but whole, every word of it.", delay=0.3))
    sent = time.monotonic()
    stream = client.chat.completions.create(
        model="m",
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
    )
    words = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert time.monotonic() - sent >= 0.3
    assert words == "Slow but whole, every word of it."
    assert server.requests[0].chunks_sent > 3  # the same events as without a delay
    whole = client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert whole.choices[0].message.content == "Slow but whole, every word of it."


def test_a_delayed_reply_is_given_up_when_the_server_stops(model: ScriptedModel) -> None:
    model.when().always(text("never sent", delay=600))
    with ModelServer(model) as server:

        def stop_once_asked() -> None:
            server.wait_for_requests(1)
            server.stop()

        stopper = threading.Thread(target=stop_once_asked)
        stopper.start()
        c = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0, timeout=60)
        try:
            with pytest.raises(openai.APIConnectionError):
                c.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
        finally:
            c.close()
            stopper.join()
    assert server.requests[0].disconnected and not server.requests[0].completed


MODEL_FILE = """
from firm.testing import ScriptedModel, text

def model(greeting):
    m = ScriptedModel()
    m.when(agent="w1").always(text(greeting + ", w1"))
    return m
"""


def test_server_in_its_own_process(tmp_path: Path) -> None:
    (tmp_path / "kit_model.py").write_text(MODEL_FILE)
    with ServerProcess(f"{tmp_path / 'kit_model.py'}:model", "Hello") as server:
        assert server.url.startswith("http://127.0.0.1:")
        env = server.env()
        client = openai.OpenAI(base_url=env["OPENAI_BASE_URL"], api_key=env["OPENAI_API_KEY"])
        try:
            reply = client.chat.completions.create(
                model=env["FIRM_MODEL"],
                messages=MESSAGES,  # type: ignore[arg-type]
                extra_headers={"X-Firm-Agent": "w1"},
            )
        finally:
            client.close()
        assert reply.choices[0].message.content == "Hello, w1"
        # The server's handler marks the request completed once it has written the whole
        # reply, which the client may already have read: wait for it, as a user would.
        deadline = time.monotonic() + 30
        while not (seen := server.requests())[0]["completed"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen == [{"seq": 1, "agent": "w1", "status": 200, "completed": True}]
        assert server.request_count() == 1


def test_server_process_that_cannot_load_its_model_says_so(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="did not start"):
        ServerProcess(f"{tmp_path / 'missing.py'}:model").start()
