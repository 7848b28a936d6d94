"""Everything a model can get wrong comes back to it as an error it can act on, never a crash:
each case below is a bad call, the error the model reads, then the corrected call."""

from __future__ import annotations

import pytest

from firm.org import OrgChart
from firm.tasks import Status
from firm.testing import (
    ModelServer,
    ScriptedModel,
    ToolCallSpec,
    call,
    call_raw,
    calls,
    complete,
    delegate,
    text,
)

from .conftest import Runner

FINISH = calls(complete("all good"))

CASES = [
    # (id, agent the goal goes to, the bad reply, what the error says, the corrected reply)
    (
        "invalid-json",
        "gabriel",
        calls(call_raw("complete_task", '{"result": "done"')),
        "arguments are not valid JSON",
        FINISH,
    ),
    (
        "arguments-not-an-object",
        "gabriel",
        calls(call_raw("complete_task", '["done"]')),
        "arguments must be a JSON object",
        FINISH,
    ),
    (
        "unknown-tool",
        "gabriel",
        calls(call("deploy_to_production", target="prod")),
        "there is no tool 'deploy_to_production'",
        FINISH,
    ),
    (
        "missing-argument",
        "gabriel",
        calls(call("complete_task")),
        "missing required argument 'result'",
        FINISH,
    ),
    (
        "extra-argument",
        "gabriel",
        calls(call("complete_task", result="done", mood="great")),
        "unexpected argument 'mood'",
        FINISH,
    ),
    (
        "wrong-type",
        "gabriel",
        calls(call("files_write", path="a.md", content=["not", "a", "string"])),
        "argument 'content'",
        FINISH,
    ),
    (
        "file-not-written",
        "gabriel",
        calls(complete("see the file", ["gabriel/never-written.md"])),
        "not in the workspace",
        FINISH,
    ),
    (
        "leaf-delegates",
        "gabriel",
        calls(delegate("hana", "Help me")),
        "there is no tool 'delegate_task'",
        FINISH,
    ),
    (
        "unknown-assignee",
        "cto",
        calls(delegate("zoe", "Build the API")),
        "there is no agent 'zoe'",
        calls(delegate("gabriel", "Build the API")),
    ),
    (
        "not-a-report",
        "cto",
        calls(delegate("maya", "Write the launch post")),
        "maya does not report to you",
        calls(delegate("gabriel", "Build the API")),
    ),
    (
        "delegates-to-itself",
        "cto",
        calls(delegate("cto", "Do it myself")),
        "you cannot delegate to yourself",
        calls(delegate("gabriel", "Build the API")),
    ),
    (
        "empty-reply",
        "gabriel",
        text("", finish_reason="stop"),
        "Your reply had no text and no tool calls",
        FINISH,
    ),
    (
        "cut-off-reply",
        "gabriel",
        text("A very long essay that never ends and", finish_reason="length"),
        "Your reply was cut off",
        FINISH,
    ),
]


def _feedback(req_messages: list[dict[str, object]]) -> str:
    """What the model was told after its bad reply: the tool results, or a user correction."""
    last = req_messages[-1]
    return str(last.get("content") or "")


@pytest.mark.parametrize(
    ("agent", "bad", "expected", "fixed"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_mistake_is_answered_then_corrected(
    three_levels: OrgChart,
    model: ScriptedModel,
    server: ModelServer,
    run_llm: Runner,
    agent: str,
    bad: object,
    expected: str,
    fixed: object,
) -> None:
    model.when(agent=agent, step=0).reply(bad)
    # The corrected reply comes only if the error the model read says what was wrong.
    model.when(agent=agent, step=1, match=lambda req: expected in _feedback(req.messages)).reply(
        fixed
    )
    if agent == "cto":  # it delegated to gabriel: gabriel delivers, the cto finishes
        model.when(agent="gabriel").reply(FINISH)
        model.when(agent="cto", woken=True).reply(FINISH)

    root = run_llm(three_levels, to=agent)

    assert root.status == Status.DONE, root.error
    first_two = server.requests_for(agent)[:2]
    assert [r.request.step for r in first_two] == [0, 1]
    assert expected in _feedback(first_two[1].request.messages)
    assert model.unused() == []


def test_several_mistakes_in_one_reply_each_get_their_own_answer(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    bad: list[ToolCallSpec] = [
        delegate("zoe", "Build the API"),
        delegate("gabriel", "Build the API"),
        delegate("cto", "Review"),
    ]
    model.when(agent="cto", step=0).reply(calls(*bad))
    # One delegation stood: the model is told which two failed and ends its turn itself.
    model.when(agent="cto", step=1, woken=False).reply(text("Waiting for Gabriel."))
    model.when(agent="gabriel").reply(FINISH)
    model.when(agent="cto", woken=True).reply(FINISH)

    root = run_llm(three_levels, to="cto")

    assert root.status == Status.DONE, root.error
    results = server.requests_for("cto")[1].request.tool_results
    assert len(results) == 3
    assert "there is no agent 'zoe'" in results[0]
    assert results[1].startswith("delegated to gabriel as task T-")
    assert "cannot delegate to yourself" in results[2]
    assert model.unused() == []


def test_a_strict_null_for_an_optional_argument_means_not_given(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    """Strict schemas make models send null for what they leave out; that is not an error."""
    model.when(agent="gabriel").reply(
        calls(call("files_read", path="nothing-here.md", offset=None, length=None)),
        calls(call("complete_task", result="checked", files=None)),
    )
    root = run_llm(three_levels, to="gabriel", strict_tools=True)
    assert root.status == Status.DONE, root.error
    read_result = server.requests_for("gabriel")[1].request.tool_results[0]
    assert "argument" not in read_result  # a workspace error about the file, not the nulls
