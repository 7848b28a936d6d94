"""A three-level company worked by CrewAI crews: delegation, waking, merging, files, usage."""

from __future__ import annotations

from pathlib import Path

from firm.api import Firm
from firm.org import OrgChart
from firm.tasks import Status
from firm.testing import (
    ModelRequest,
    ModelServer,
    Reply,
    ScriptedModel,
    calls,
    complete,
    delegate,
    write_file,
)

from .conftest import Runner


def script_company(model: ScriptedModel) -> None:
    model.when(agent="ceo", woken=False).reply(
        calls(
            delegate("cto", "Technical plan", "Plan the backend and the frontend."),
            delegate("cmo", "Marketing plan", "Plan the launch campaign."),
        )
    )
    for manager, reports in (("cto", ("gabriel", "hana")), ("cmo", ("maya", "omar"))):
        model.when(agent=manager, woken=False).reply(
            calls(*[delegate(r, f"{r} part", f"Your part of the {manager} plan.") for r in reports])
        )
    for agent in ("gabriel", "hana", "maya", "omar"):
        path = f"{agent}/deliverable.md"
        model.when(agent=agent).reply(
            calls(
                write_file(path, f"# {agent}\n\nThe {agent} deliverable.\n"),
                complete(f"{agent} wrote {path}", [path]),
            )
        )

    def merge(req: ModelRequest) -> Reply:
        path = f"{req.agent}/merged.md"
        return calls(
            write_file(path, f"# {req.agent} merged\n\n{req.brief}\n"),
            complete(f"{req.agent} merged its reports' work", [path]),
        )

    model.when(agent="cto", woken=True).reply(merge)
    model.when(agent="cmo", woken=True).reply(merge)
    model.when(agent="ceo", woken=True).reply(
        calls(complete("The launch is planned: see the merged plans.", ["cto/merged.md"]))
    )


def test_three_levels_with_crewai(
    three_levels: OrgChart,
    model: ScriptedModel,
    server: ModelServer,
    firm: Firm,
    run_crewai: Runner,
    tmp_path: Path,
) -> None:
    script_company(model)
    root = run_crewai(three_levels)

    assert root.status == Status.DONE, root.error
    assert root.result == "The launch is planned: see the merged plans."
    tree = firm.subtree(root.id)
    assert {t.assignee for t in tree} == {"ceo", "cto", "cmo", "gabriel", "hana", "maya", "omar"}
    assert all(t.status == Status.DONE for t in tree)
    merged = (tmp_path / "ws" / "cto" / "merged.md").read_text()
    assert "gabriel wrote gabriel/deliverable.md" in merged  # the results reached the manager
    # The minimum: one model call per session (ceo and managers twice: delegate, then merge),
    # none spent on a final answer after complete_task or after the delegations.
    assert len(server.requests) == 3 * 2 + 4
    # Every call came from CrewAI: its prompt carries the Task, and the agent's tools only.
    ceo_call = server.requests_for("ceo")[0].request
    assert "Current Task:" in ceo_call.brief
    assert set(ceo_call.tool_names) >= {"delegate_task", "complete_task", "fail_task"}
    leaf_call = server.requests_for("gabriel")[0].request
    assert "delegate_task" not in leaf_call.tool_names  # no reports, no delegation tool
    # Usage rolled up: each task records its model calls, and the whole tree adds up.
    usage = [t.usage for t in tree]
    assert sum(u.get("calls", 0) for u in usage) == len(server.requests)
    assert all(u.get("prompt_tokens", 0) > 0 for u in usage)
    # Each call is in the log as the llm brain logs it: the office, traces and `firm show`
    # read these, whichever brain made the call.
    calls = [e for e in firm.events(0, 10_000) if e.kind == "model_call"]
    assert len(calls) == len(server.requests)
    assert all(e.data["prompt_tokens"] > 0 and e.data["model"] for e in calls)
    assert {e.agent for e in calls} == {t.assignee for t in tree}
