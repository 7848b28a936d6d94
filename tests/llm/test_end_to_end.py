"""A three-level company driven by a model over HTTP: delegation, waking, merging, files."""

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
    call,
    calls,
    complete,
    delegate,
    write_file,
)
from tests.support import events_of

from .conftest import Runner


def script_company(model: ScriptedModel) -> None:
    model.when(agent="ceo", woken=False).reply(
        calls(
            delegate("cto", "Technical plan", "Plan the backend and the frontend."),
            delegate("cmo", "Marketing plan", "Plan the launch campaign."),
            text="I will split this between engineering and marketing.",
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
        agent = req.agent
        path = f"{agent}/merged.md"
        return calls(
            write_file(path, f"# {agent} merged\n\n{req.brief}\n"),
            complete(f"{agent} merged its reports' work", [path]),
        )

    model.when(agent="cto", woken=True).reply(
        # The cto reads one report's file before merging: a tool result comes back to it.
        calls(call("files_read", path="gabriel/deliverable.md")),
        merge,
    )
    model.when(agent="cmo", woken=True).reply(merge)
    model.when(agent="ceo", woken=True).reply(
        calls(complete("The launch is planned: see the merged plans.", ["cto/merged.md"]))
    )


def test_three_levels_through_http(
    three_levels: OrgChart,
    model: ScriptedModel,
    server: ModelServer,
    firm: Firm,
    run_llm: Runner,
    tmp_path: Path,
) -> None:
    script_company(model)
    root = run_llm(three_levels)

    assert root.status == Status.DONE, root.error
    assert root.result == "The launch is planned: see the merged plans."
    tree = firm.subtree(root.id)
    assert {t.assignee for t in tree} == {"ceo", "cto", "cmo", "gabriel", "hana", "maya", "omar"}
    assert all(t.status == Status.DONE for t in tree)
    ws = tmp_path / "ws"
    for agent in ("gabriel", "hana", "maya", "omar"):
        assert (ws / agent / "deliverable.md").read_text().startswith(f"# {agent}")
    # The merge saw its reports' results in the brief, and wrote them into its file.
    merged = (ws / "cto" / "merged.md").read_text()
    assert "gabriel wrote gabriel/deliverable.md" in merged
    assert "hana wrote hana/deliverable.md" in merged

    # No wasted call: one per leaf session, one per manager session (the cto's read is one
    # more, because it asked for it). The reply that only delegated ended the turn.
    calls_by_agent = {t.assignee: t.usage["calls"] for t in tree}
    assert calls_by_agent == {
        "ceo": 2,
        "cto": 3,
        "cmo": 2,
        "gabriel": 1,
        "hana": 1,
        "maya": 1,
        "omar": 1,
    }
    assert len(server.requests) == 11
    assert model.unused() == []
    # The server marks a request completed once its handler has written the whole reply,
    # which can be just after the client has read it: wait for the marks, not the run.
    assert server.wait_until(lambda rs: all(r.ended for r in rs), timeout=30)
    assert all(r.completed and r.request.stream for r in server.requests)
    # The file the cto read came back to it as the tool result.
    read_back = server.requests_for("cto")[-1].request.tool_results
    assert read_back == ["# gabriel\n\nThe gabriel deliverable.\n"]
    # Usage is recorded per session and adds up over the tree.
    assert all(t.usage["prompt_tokens"] > 0 and t.usage["completion_tokens"] > 0 for t in tree)
    # The model's text between tool calls went to the activity log as a thought.
    thoughts = [e.data["text"] for e in events_of(firm, "thought", root.id)]
    assert "I will split this between engineering and marketing." in thoughts


def test_whole_answers_without_streaming(
    three_levels: OrgChart, server: ModelServer, model: ScriptedModel, run_llm: Runner
) -> None:
    """Servers that cannot stream work too: the same company, answers in one piece."""
    script_company(model)
    root = run_llm(three_levels, stream=False)
    assert root.status == Status.DONE, root.error
    assert server.requests and not any(r.request.stream for r in server.requests)
    assert "stream_options" not in server.requests[0].body


def test_the_autopilot_runs_any_company_at_the_minimum(
    three_levels: OrgChart, tmp_path: Path
) -> None:
    """The default scripted model: one call per leaf task, two per manager task."""
    with ModelServer(ScriptedModel()) as server, Firm(tmp_path / "a.db", heartbeat=0.2) as f:
        root = f.run(
            three_levels,
            "Launch an AI note-taking app",
            brain="llm",
            brain_options=server.brain_options(),
            workspace=tmp_path / "ws",
            timeout=60,
        )
        assert root.status == Status.DONE, root.error
        tree = f.subtree(root.id)
        assert sum(t.usage["calls"] for t in tree) == 4 * 1 + 3 * 2
        assert all(Path(tmp_path / "ws" / p).is_file() for t in tree for p in t.files)


def test_complete_in_the_middle_of_a_reply_ends_the_task_there(
    three_levels: OrgChart,
    model: ScriptedModel,
    server: ModelServer,
    run_llm: Runner,
    tmp_path: Path,
) -> None:
    model.when(agent="gabriel").reply(
        calls(
            write_file("gabriel/a.md", "a"),
            complete("done", ["gabriel/a.md"]),
            write_file("gabriel/notes.md", "written after complete_task, in the same reply"),
        )
    )
    root = run_llm(three_levels, to="gabriel")
    assert root.status == Status.DONE, root.error
    assert root.files == ("gabriel/a.md",)
    assert (tmp_path / "ws" / "gabriel" / "a.md").is_file()  # what came before it ran
    assert not (tmp_path / "ws" / "gabriel" / "notes.md").exists()  # what came after did not
    assert len(server.requests) == 1
