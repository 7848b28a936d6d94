"""What a model's reply carries that no log can hold, or that comes too late, never runs."""

from __future__ import annotations

from pathlib import Path

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.org import OrgChart
from firm.tasks import Status
from firm.testing import ModelServer, ScriptedModel, call_raw, calls, complete, write_file
from tests.support import events_of

from .conftest import Runner


def test_a_call_after_complete_task_in_the_same_reply_is_refused_and_logged(
    three_levels: OrgChart,
    model: ScriptedModel,
    server: ModelServer,
    run_llm: Runner,
    firm: Firm,
    tmp_path: Path,
) -> None:
    model.when(agent="gabriel").reply(
        calls(complete("all done"), write_file("gabriel/late.md", "written after the end"))
    )
    root = run_llm(three_levels, to="gabriel")

    assert root.status == Status.DONE and root.result == "all done"
    assert not (tmp_path / "ws" / "gabriel" / "late.md").exists()  # the body never ran
    (refused,) = events_of(firm, "tool_error", root.id)
    assert refused.data["tool"] == "files.write" and "already ended" in refused.data["error"]
    (completed,) = [e for e in events_of(firm, "tool_call", root.id)]
    assert completed.data["tool"] == "complete_task" and completed.seq < refused.seq
    assert len(server.requests_for("gabriel")) == 1  # and no model call was spent on it
    report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
    assert report.verified and "1 allowed call(s)" in report.check("containment").detail


def test_arguments_a_model_sends_that_no_log_can_hold_are_a_tool_error_it_can_act_on(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, run_llm: Runner, firm: Firm
) -> None:
    model.when(agent="gabriel", step=0).reply(
        calls(
            call_raw("files_write", '{"path": "a.md", "content": "\\ud800"}'),
            call_raw("files_write", '{"path": "b.md", "content": "x", "n": NaN}'),
            call_raw("files_list", '{"path": ' + "[" * 10_000 + "]" * 10_000 + "}"),
        )
    )
    model.when(agent="gabriel", step=1).reply(calls(complete("fixed")))
    root = run_llm(three_levels, to="gabriel")

    assert root.status == Status.DONE, root.error
    results = server.requests_for("gabriel")[1].request.tool_results
    assert "lone surrogate" in results[0] and "'content'" in results[0]
    assert "NaN is not a finite number" in results[1]
    assert "nested deeper than" in results[2]
    assert len(events_of(firm, "tool_error", root.id)) == 3
    assert [e.data["tool"] for e in events_of(firm, "tool_call", root.id)] == ["complete_task"]
