"""CrewAI's failures are task failures with the reason; a cancel stops a crew mid-step."""

from __future__ import annotations

from pathlib import Path

from firm.api import Firm
from firm.org import OrgChart
from firm.tasks import Status
from firm.testing import ModelServer, ScriptedModel, call, calls, error, hang, text

from .conftest import FAST, Runner


def test_a_final_answer_without_complete_task_is_the_result(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_crewai: Runner
) -> None:
    model.when(agent="gabriel").reply(text("The schema has three tables."))
    root = run_crewai(three_levels, "Design the schema", to="gabriel")
    assert root.status == Status.DONE, root.error
    assert root.result == "The schema has three tables."
    assert len(server.requests) == 1


def test_an_unknown_model_is_a_clear_failure(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_crewai: Runner
) -> None:
    model.when(agent="gabriel").always(error(404, "The model 'gpt-9' does not exist"))
    root = run_crewai(three_levels, "Design the schema", to="gabriel")
    assert root.status == Status.FAILED
    assert "was not found" in (root.error or "") and "--model" in (root.error or "")
    assert "Traceback" not in (root.error or "")


def test_the_iteration_cap_fails_the_task_without_a_forced_answer(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_crewai: Runner
) -> None:
    model.when(agent="gabriel").always(calls(call("files_list", path=".")))
    root = run_crewai(three_levels, "Loop", to="gabriel", max_iterations=3)
    assert root.status == Status.FAILED
    assert "limit of 3 model calls" in (root.error or "")
    assert len(server.requests) == 3  # no extra call asking for a final answer


def test_cancel_in_the_middle_of_a_crewai_step(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, firm: Firm, tmp_path: Path
) -> None:
    model.when(agent="gabriel").always(hang())
    root = firm.submit(
        three_levels,
        "Write the essay",
        to="gabriel",
        brain="crewai",
        brain_options=server.brain_options(**{**FAST, "timeout": 30.0}),
        workspace=tmp_path / "ws",
    )
    firm.engine.start()
    assert server.wait_for_requests(1, timeout=60)

    firm.cancel(root.id, "the user changed their mind")

    # The session let go while the request still hangs (its timeout is 30 s; 20 s only
    # bounds a hang on a loaded machine and still tells the two apart).
    firm.engine.run_until_idle(timeout=20)
    assert server.requests[0].ended is None
    task = firm.task(root.id)
    assert task.status == Status.CANCELLED and task.error == "the user changed their mind"
    assert len(server.requests) == 1


def test_a_token_budget_stops_the_crew_before_a_call_it_cannot_afford(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_crewai: Runner
) -> None:
    # The first call fits the budget; what it cost (reported by the server) leaves too
    # little for the next prompt, so the crew stops there instead of overspending.
    model.when(agent="gabriel").always(calls(call("files_list", path="."), usage=(1500, 100)))
    root = run_crewai(three_levels, "Work", to="gabriel", grant={"budget_tokens": 2000})
    assert root.status == Status.FAILED
    assert (root.error or "").startswith("budget_exhausted")
    assert len(server.requests) == 1
    assert root.usage["prompt_tokens"] == 1500 and root.usage["calls"] == 1
