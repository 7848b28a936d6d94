"""A company works a goal to the end: delegation at every depth, files on disk, a report."""

from __future__ import annotations

from pathlib import Path

from firm.engine import Engine
from firm.org import OrgChart
from firm.store import SqlStore
from firm.tasks import Priority, Status


def test_three_level_company_end_to_end(
    store: SqlStore, three_levels: OrgChart, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    with Engine(store, max_concurrent=4, heartbeat=0.2) as engine:
        root = engine.submit(three_levels, "Launch an AI note-taking app", workspace=ws)
        done = engine.run_until(root.id, timeout=60)

    assert done.status == Status.DONE
    tasks = store.subtree(root.id)
    assert len(tasks) == 7
    assert {t.status for t in tasks} == {Status.DONE}
    by_agent = {t.assignee: t for t in tasks}
    assert set(by_agent) == {"ceo", "cto", "cmo", "gabriel", "hana", "maya", "omar"}
    assert by_agent["gabriel"].parent_id == by_agent["cto"].id
    assert by_agent["cto"].parent_id == root.id

    ceo_report = ws / f"ceo/{root.id}-report.md"
    report_text = ceo_report.read_text()
    for leaf in ("gabriel", "hana", "maya", "omar"):
        task = by_agent[leaf]
        assert len(task.files) == 1
        deliverable = ws / task.files[0]
        assert deliverable.is_file()
        assert task.title in deliverable.read_text()
        assert task.files[0] in report_text  # the CEO's report mentions each deliverable
        assert task.files[0] in done.files
    # Managers were woken once each and merged: two sessions per manager, one per leaf.
    started = [e for e in store.events_after(0, 10_000) if e.kind == "started"]
    per_task = {t.id: sum(1 for e in started if e.task_id == t.id) for t in tasks}
    assert [per_task[by_agent[a].id] for a in ("ceo", "cto", "cmo")] == [2, 2, 2]
    assert [per_task[by_agent[a].id] for a in ("gabriel", "hana", "maya", "omar")] == [1] * 4


def test_priority_and_language_are_inherited(
    store: SqlStore, three_levels: OrgChart, tmp_path: Path
) -> None:
    with Engine(store, heartbeat=0.2) as engine:
        root = engine.submit(
            three_levels,
            "Lancer une application de prise de notes pour les équipes",
            workspace=tmp_path / "ws",
            priority="urgent",
        )
        engine.run_until(root.id, timeout=60)
    tasks = store.subtree(root.id)
    assert {t.language for t in tasks} == {"fr"}
    assert {t.priority for t in tasks} == {Priority.URGENT}


def test_goal_can_go_to_a_named_agent(
    store: SqlStore, three_levels: OrgChart, tmp_path: Path
) -> None:
    with Engine(store, heartbeat=0.2) as engine:
        root = engine.submit(
            three_levels, "Plan the launch campaign", to="cmo", workspace=tmp_path / "ws"
        )
        engine.run_until(root.id, timeout=60)
    assert [t.assignee for t in store.subtree(root.id)] == ["cmo", "maya", "omar"]


def test_activity_log_has_increasing_sequence_and_every_kind(
    store: SqlStore, three_levels: OrgChart, tmp_path: Path
) -> None:
    with Engine(store, heartbeat=0.2) as engine:
        root = engine.submit(three_levels, "Launch it", workspace=tmp_path / "ws")
        engine.run_until(root.id, timeout=60)
    events = store.events_after(0, 10_000)
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(events) + 1))
    kinds = {e.kind for e in events}
    assert {
        "created",
        "delegated",
        "started",
        "waiting",
        "woken",
        "completed",
        "thought",
        "tool_call",
    } <= kinds
    delegated = [e for e in events if e.kind == "delegated"]
    assert {e.data["to"] for e in delegated} == {"cto", "cmo", "gabriel", "hana", "maya", "omar"}


def test_a_session_that_ends_without_completing_has_its_last_message_as_result(
    store: SqlStore, three_levels: OrgChart, tmp_path: Path
) -> None:
    from firm.session import Session
    from firm.testing import FunctionBrain

    def chatty(session: Session) -> str:
        session.call("files.write", {"path": "notes.md", "content": "notes"})
        return "Here is what I found: three options, the second is best."

    def silent(session: Session) -> None:
        return None

    brain = FunctionBrain({"gabriel": chatty, "hana": silent})
    with Engine(store, heartbeat=0.2, brain=brain) as engine:
        said = engine.submit(three_levels, "Look into it", to="gabriel", workspace=tmp_path / "w")
        mute = engine.submit(three_levels, "Look into it", to="hana", workspace=tmp_path / "w")
        said_done = engine.run_until(said.id, timeout=30)
        mute_done = engine.run_until(mute.id, timeout=30)
    assert said_done.status == Status.DONE
    assert said_done.result == "Here is what I found: three options, the second is best."
    assert said_done.files == ("notes.md",)  # what the session wrote goes with it
    assert mute_done.status == Status.FAILED
    assert mute_done.error == "hana ended its session without a result"
