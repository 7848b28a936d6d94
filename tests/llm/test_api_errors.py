"""Transient API errors are retried, within a bound; permanent ones fail the task at once,
saying what to fix."""

from __future__ import annotations

import pytest

from firm.api import Firm
from firm.org import OrgChart
from firm.tasks import Status
from firm.testing import (
    ModelServer,
    ScriptedModel,
    call,
    calls,
    complete,
    delegate,
    drop,
    error,
    hang,
)
from tests.support import events_of

from .conftest import FAST, Runner

FINISH = calls(complete("all good"))


def test_rate_limited_then_answered(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, firm: Firm, run_llm: Runner
) -> None:
    model.when(agent="gabriel").reply(error(429, "Rate limit reached", retry_after=0.01), FINISH)
    root = run_llm(three_levels, to="gabriel")

    assert root.status == Status.DONE, root.error
    assert [r.status for r in server.requests] == [429, 200]
    retries = events_of(firm, "model_retry", root.id)
    assert len(retries) == 1 and "429" in retries[0].data["error"]
    assert root.usage["calls"] == 1  # a refused call is not a model call


def test_a_dropped_connection_is_retried(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    model.when(agent="gabriel").reply(drop(), FINISH)
    root = run_llm(three_levels, to="gabriel")
    assert root.status == Status.DONE, root.error
    assert len(server.requests) == 2


def test_a_500_storm_exhausts_the_retries(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    model.when(agent="gabriel").always(error(500, "The server had an error"))
    root = run_llm(three_levels, to="gabriel", max_retries=2)

    assert root.status == Status.FAILED
    assert len(server.requests) == 3  # the first try and two retries, then no more
    assert "500: The server had an error" in (root.error or "")
    assert "gave up after 3 attempts" in (root.error or "")


def test_a_server_that_hangs_times_out(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    model.when(agent="gabriel").always(hang())
    # FAST's 5 s timeout, not a fraction of a second: both requests are counted by the server
    # only once it has read them, which a loaded machine can take longer than 0.3 s to do.
    root = run_llm(three_levels, to="gabriel", max_retries=1)

    assert root.status == Status.FAILED
    assert len(server.requests) == 2
    assert "did not answer within 5s" in (root.error or "")


def test_a_stream_that_stalls_times_out_then_succeeds(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    model.when(agent="gabriel").reply(hang(), FINISH)
    # The answer after the stall must come within the same timeout as the stall's: at 0.3 s
    # a loaded machine missed it, the retry found no rule left and the task failed.
    root = run_llm(three_levels, to="gabriel")
    assert root.status == Status.DONE, root.error
    first = server.requests[0]
    assert first.reply is not None and first.reply.hang is not None and first.status == 0


@pytest.mark.parametrize(
    ("status", "message", "says"),
    [
        (401, "Incorrect API key provided", "refused the key (401: Incorrect API key provided)"),
        (403, "Project does not have access", "set OPENAI_API_KEY to a valid key"),
        (404, "The model `gpt-9` does not exist", "check --model, llm.model in the org chart"),
        (400, "Invalid value for 'temperature'", "rejected the request (400: Invalid value"),
    ],
)
def test_a_permanent_error_fails_at_once_with_what_to_fix(
    three_levels: OrgChart,
    model: ScriptedModel,
    server: ModelServer,
    firm: Firm,
    run_llm: Runner,
    status: int,
    message: str,
    says: str,
) -> None:
    model.when(agent="gabriel").always(error(status, message))
    root = run_llm(three_levels, to="gabriel")

    assert root.status == Status.FAILED
    assert says in (root.error or "")
    assert len(server.requests) == 1  # not retried
    assert len(events_of(firm, "model_error", root.id)) == 1


def test_the_wrong_key_is_refused_by_the_server(
    three_levels: OrgChart, firm: Firm, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    with ModelServer(ScriptedModel(), api_key="sk-right") as server:
        root = firm.run(
            three_levels,
            "Launch",
            brain="llm",
            brain_options=server.brain_options(**FAST),
            timeout=30,
        )
        assert root.status == Status.FAILED
        assert "refused the key" in (root.error or "")
        assert server.requests[0].headers["authorization"] == "Bearer sk-wrong"


def test_a_model_error_after_delegating_ends_the_turn_instead(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    """The subtasks already exist: the manager waits for them and tries again when woken."""
    # Delegating and listing files in one reply: not only delegation, so the model is asked
    # again — and that call fails for good.
    model.when(agent="cto", step=0).reply(
        calls(delegate("gabriel", "Build the API"), call("files_list"))
    )
    model.when(agent="cto", step=1).reply(error(400, "context too long"))
    model.when(agent="gabriel").reply(FINISH)
    model.when(agent="cto", woken=True).reply(FINISH)
    root = run_llm(three_levels, to="cto")
    assert root.status == Status.DONE, root.error
    assert [r.request.step for r in server.requests_for("cto")] == [0, 1, 0]
