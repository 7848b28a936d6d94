"""What the model receives: a stable system prompt, the right tools, the brief with results."""

from __future__ import annotations

from collections.abc import Callable

from firm.org import OrgChart
from firm.tasks import Status
from firm.testing import ModelServer, ScriptedModel, calls, complete, delegate, error, fail

from .conftest import Runner


def _manager_script(model: ScriptedModel) -> None:
    model.when(agent="cto", woken=False).reply(
        calls(delegate("gabriel", "Build the API"), delegate("hana", "Build the web app"))
    )
    model.when(agent="gabriel").reply(calls(complete("The API is at /v1; tests pass.")))
    model.when(agent="hana").reply(calls(complete("The web app talks to /v1.")))
    model.when(agent="cto", woken=True).reply(calls(complete("Both halves are built.")))


def test_system_prompt_and_tools_are_the_same_in_every_session_of_an_agent(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    _manager_script(model)
    root = run_llm(three_levels, to="cto")
    assert root.status == Status.DONE, root.error

    first, second = (r.request for r in server.requests_for("cto"))
    assert first.task_id == second.task_id and first.brief != second.brief
    # The prefix a provider caches: system prompt and tools, byte for byte the same.
    assert first.messages[0] == second.messages[0]
    assert first.tools == second.tools
    system = first.system
    assert "Ben, Chief Technology Officer at Test Co" in system
    assert "You report to Ava, Chief Executive Officer (ceo)" in system
    assert "- gabriel: Gabriel, Backend Engineer" in system
    assert "- hana: Hana, Frontend Engineer" in system
    assert "You will be called again with their results" in system
    assert "After delegating, end your turn" in system
    assert root.id not in system  # nothing about one task: that is the brief's job
    # The brief is the user message that follows.
    assert first.messages[1] == {"role": "user", "content": first.brief}
    assert first.brief.startswith(f"Task {root.id}: ")


def test_a_second_task_of_the_same_agent_starts_with_the_same_prefix(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    model.when(agent="gabriel").always(calls(complete("done")))
    run_llm(three_levels, "Build the API", to="gabriel")
    run_llm(three_levels, "Fix the login bug", to="gabriel")
    one, two = (r.request for r in server.requests_for("gabriel"))
    assert one.task_id != two.task_id
    assert one.messages[0] == two.messages[0] and one.tools == two.tools
    assert "Build the API" in one.brief and "Fix the login bug" in two.brief


def test_tools_are_offered_with_their_schemas(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    _manager_script(model)
    run_llm(three_levels, to="cto")
    manager = server.requests_for("cto")[0].request
    worker = server.requests_for("gabriel")[0].request

    assert set(manager.tool_names) == {
        "delegate_task",
        "complete_task",
        "fail_task",
        "files_read",
        "files_write",
        "files_list",
    }
    assert "delegate_task" not in worker.tool_names  # a leaf has nobody to delegate to
    delegate_fn = manager.tool("delegate_task")
    assert delegate_fn is not None
    params = delegate_fn["parameters"]
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert set(params["required"]) == {"assignee", "title", "description"}
    assert params["properties"]["assignee"] == {"type": "string"}
    priority = params["properties"]["priority"]["anyOf"][0]
    assert priority["enum"] == ["low", "normal", "high", "urgent"]
    assert "end your turn" in delegate_fn["description"]
    write = worker.tool("files_write")
    assert write is not None
    assert write["parameters"]["required"] == ["path", "content"]
    assert all(t["type"] == "function" for t in worker.tools)


def test_strict_tools_when_asked(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    _manager_script(model)
    run_llm(three_levels, to="cto", strict_tools=True)
    req = server.requests_for("cto")[0].request
    complete_fn = req.tool("complete_task")
    assert complete_fn is not None and complete_fn["strict"] is True
    params = complete_fn["parameters"]
    assert params["required"] == ["result", "files"]  # strict: every property listed
    assert {"type": "null"} in params["properties"]["files"]["anyOf"]
    assert "default" not in params["properties"]["files"]
    # delegate_task takes a free-form dict (limits): it stays usable, just not strict.
    delegate_fn = req.tool("delegate_task")
    assert delegate_fn is not None and "strict" not in delegate_fn


def test_strict_tools_can_be_asked_for_in_the_org_chart(
    org_factory: Callable[[str], OrgChart],
    model: ScriptedModel,
    server: ModelServer,
    run_llm: Runner,
) -> None:
    org = org_factory(
        """\
        company: Test Co
        llm: {strict_tools: true}
        agents:
          - {id: cto, name: Ben, title: CTO}
          - {id: gabriel, name: Gabriel, title: Engineer, reports_to: cto,
             llm: {strict_tools: false}}
        """
    )
    _manager_script_one(model)
    run_llm(org, to="cto")
    strict = {
        r.headers["x-firm-agent"]: r.request.tool("complete_task").get("strict")  # type: ignore[union-attr]
        for r in server.requests
    }
    assert strict == {"cto": True, "gabriel": None}  # the agent's own setting wins


def test_the_brief_lists_the_subtask_results(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    _manager_script(model)
    root = run_llm(three_levels, to="cto")
    brief = server.requests_for("cto")[1].request.brief
    for child in root.id, "Build the API", "Build the web app":
        assert child in brief
    assert "(assigned to gabriel) → done" in brief
    assert "result: The API is at /v1; tests pass." in brief
    assert "result: The web app talks to /v1." in brief


def test_a_failed_subtask_reaches_the_manager_with_its_reason(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    model.when(agent="cto", woken=False).reply(
        calls(delegate("gabriel", "Build the API"), delegate("hana", "Build the web app"))
    )
    model.when(agent="gabriel").reply(calls(fail("the database is down")))
    model.when(agent="hana").always(error(404, "The model `nope` does not exist"))
    model.when(agent="cto", woken=True).reply(calls(complete("Nothing got built.")))
    run_llm(three_levels, to="cto")
    brief = server.requests_for("cto")[1].request.brief
    assert "(assigned to gabriel) → failed\n  reason: the database is down" in brief
    assert "(assigned to hana) → failed" in brief and "was not found" in brief


def test_models_and_settings_come_from_the_org_chart_per_agent(
    org_factory: Callable[[str], OrgChart],
    model: ScriptedModel,
    server: ModelServer,
    run_llm: Runner,
) -> None:
    org = org_factory(
        """\
        company: Test Co
        llm: {model: small-model, temperature: 0.2, max_tokens: 500}
        agents:
          - {id: cto, name: Ben, title: CTO}
          - id: gabriel
            name: Gabriel
            title: Backend Engineer
            reports_to: cto
            llm: {model: big-model, temperature: 0.7}
        """
    )
    _manager_script_one(model)
    run_llm(org, to="cto", model=None)  # no --model: the chart decides
    cto = server.requests_for("cto")[0].body
    gabriel = server.requests_for("gabriel")[0].body
    assert (cto["model"], cto["temperature"], cto["max_tokens"]) == ("small-model", 0.2, 500)
    assert (gabriel["model"], gabriel["temperature"], gabriel["max_tokens"]) == (
        "big-model",
        0.7,
        500,
    )


def test_the_model_option_replaces_the_company_default_not_an_agents_own_choice(
    org_factory: Callable[[str], OrgChart],
    model: ScriptedModel,
    server: ModelServer,
    run_llm: Runner,
) -> None:
    org = org_factory(
        """\
        company: Test Co
        llm: {model: small-model, temperature: 0.9}
        agents:
          - {id: cto, name: Ben, title: CTO}
          - {id: gabriel, name: Gabriel, title: Engineer, reports_to: cto,
             llm: {model: big-model, temperature: 0.1}}
        """
    )
    _manager_script_one(model)
    run_llm(org, to="cto", model="local-model", temperature=0.5,
            max_tokens_param="max_completion_tokens")  # fmt: skip
    by_agent = {r.headers["x-firm-agent"]: r.body for r in server.requests}
    # The CTO has no model of its own: the run's --model replaces the company's default.
    assert by_agent["cto"]["model"] == "local-model" and by_agent["cto"]["temperature"] == 0.5
    # Gabriel's own entry in the chart is the most specific choice, and wins.
    assert by_agent["gabriel"]["model"] == "big-model"
    assert by_agent["gabriel"]["temperature"] == 0.1
    assert all("max_tokens" not in r.body for r in server.requests)


def _manager_script_one(model: ScriptedModel) -> None:
    model.when(agent="cto", woken=False).reply(calls(delegate("gabriel", "Build the API")))
    model.when(agent="gabriel").reply(calls(complete("built")))
    model.when(agent="cto", woken=True).reply(calls(complete("done")))


def test_requests_say_which_agent_and_task_they_serve(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner
) -> None:
    model.when(agent="gabriel").reply(calls(complete("done")))
    root = run_llm(three_levels, to="gabriel")
    headers = server.requests[0].headers
    assert headers["x-firm-agent"] == "gabriel"
    assert headers["x-firm-task"] == root.id
