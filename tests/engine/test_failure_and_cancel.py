"""Failure travels up (invariant 3); cancellation travels down in one pass (invariant 4)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import event

from firm.brains.simulation import SimulationBrain
from firm.engine import Engine
from firm.org import OrgChart
from firm.session import Session
from firm.store import NewTask, RunSpec, SqlStore
from firm.tasks import Priority, Status
from firm.testing import FunctionBrain


def recording_sim(**options: object) -> tuple[FunctionBrain, dict[str, list[str]]]:
    """The simulation brain, with every brief it was given kept per agent."""
    sim = SimulationBrain.from_options(dict(options))
    briefs: dict[str, list[str]] = {}

    def run(session: Session) -> str | None:
        briefs.setdefault(session.agent_id, []).append(session.brief)
        return sim.run(session)

    return FunctionBrain({}, default=run), briefs


def test_a_failed_report_reaches_its_manager_who_decides(
    store: SqlStore, three_levels: OrgChart, tmp_path: Path
) -> None:
    brain, briefs = recording_sim(fail_agents=["omar"])
    with Engine(store, heartbeat=0.2, brain=brain) as engine:
        root = engine.submit(three_levels, "Launch the app", workspace=tmp_path / "ws")
        done = engine.run_until(root.id, timeout=60)
    tasks = {t.assignee: t for t in store.subtree(root.id)}
    assert tasks["omar"].status == Status.FAILED
    assert "simulated failure" in (tasks["omar"].error or "")
    merge_brief = briefs["cmo"][-1]
    assert f"[{tasks['omar'].id}] Growth plan: Launch the app (assigned to omar) → failed" in (
        merge_brief
    )
    assert "reason: simulated failure: omar is set to fail" in merge_brief
    # The CMO decided to deliver what it has and say what is missing.
    assert tasks["cmo"].status == Status.DONE
    assert "Not delivered (1)" in (tasks["cmo"].result or "")
    assert done.status == Status.DONE


def test_when_every_report_fails_the_manager_fails_and_the_failure_climbs(
    store: SqlStore, three_levels: OrgChart, tmp_path: Path
) -> None:
    brain, briefs = recording_sim(fail_agents=["maya", "omar"])
    with Engine(store, heartbeat=0.2, brain=brain) as engine:
        root = engine.submit(three_levels, "Launch the app", workspace=tmp_path / "ws")
        done = engine.run_until(root.id, timeout=60)
    tasks = {t.assignee: t for t in store.subtree(root.id)}
    assert tasks["cmo"].status == Status.FAILED
    assert (tasks["cmo"].error or "").startswith("all 2 subtasks failed; first: ")
    assert (
        f"[{tasks['cmo'].id}] Marketing plan: Launch the app (assigned to cmo) → failed"
        in (briefs["ceo"][-1])
    )
    assert done.status == Status.DONE  # the CEO still delivers the technical half


def test_a_failure_that_climbs_a_deep_tree_stays_short_at_the_root(
    store: SqlStore, three_levels: OrgChart, tmp_path: Path
) -> None:
    brain, _ = recording_sim(fail_agents=["maya", "omar", "gabriel", "hana"])
    with Engine(store, heartbeat=0.2, brain=brain) as engine:
        root = engine.submit(three_levels, "Launch the app", workspace=tmp_path / "ws")
        done = engine.run_until(root.id, timeout=60)
    assert done.status == Status.FAILED
    error = done.error or ""
    assert error.startswith("all 2 subtasks failed; first: ")
    assert len(error) < 400, error


def slow_job(
    stopped: list[str], steps: int, working: list[str] | None = None
) -> Callable[[Session], str | None]:
    """A brain for a long job done step by step, checking for cancellation; records who got
    to work (in `working`) and who was stopped before delivering (the simulation brain's
    result) at the end."""
    sim = SimulationBrain(latency=0.0)

    def run(session: Session) -> str | None:
        if working is not None:
            working.append(session.agent_id)
        try:
            for _ in range(steps):
                session.sleep(0.02)
                session.check_cancelled()
        except BaseException:
            stopped.append(session.agent_id)
            raise
        return sim.run(session)

    return run


def test_cancelling_a_subtree_stops_running_sessions_and_wakes_the_parent(
    store: SqlStore, three_levels: OrgChart, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    sim = SimulationBrain(latency=0.0)
    stopped: list[str] = []
    working: list[str] = []
    slow_leaf = slow_job(stopped, 200, working)
    brain = FunctionBrain({"gabriel": slow_leaf, "hana": slow_leaf}, default=sim.run)
    with Engine(store, max_concurrent=8, heartbeat=0.2, brain=brain) as engine:
        root = engine.submit(three_levels, "Launch the app", workspace=ws)
        deadline = time.monotonic() + 20
        # Their brains at work, not only their tasks claimed: a session cancelled before its
        # brain starts stops without ever being in `stopped`.
        while True:
            if {"gabriel", "hana"} <= set(working):
                break
            assert time.monotonic() < deadline, "leaves never started"
            time.sleep(0.02)
        cto = next(t for t in store.subtree(root.id) if t.assignee == "cto")
        cancelled = engine.cancel(cto.id, "the board dropped the technical track")
        assert {store.get_task(t).assignee for t in cancelled} == {"cto", "gabriel", "hana"}
        done = engine.run_until(root.id, timeout=30)

    assert sorted(stopped) == ["gabriel", "hana"]
    tasks = {t.assignee: t for t in store.subtree(root.id)}
    for a in ("cto", "gabriel", "hana"):
        assert tasks[a].status == Status.CANCELLED
        assert tasks[a].error == "the board dropped the technical track"
    assert not (ws / "gabriel").exists()  # the cancelled leaves never delivered
    assert done.status == Status.DONE
    cancel_events = [e for e in store.events_after(0, 10_000) if e.kind == "cancelled"]
    assert [(e.task_id, e.data["ended"]) for e in cancel_events] == [(cto.id, 3)]  # one entry
    assert store.ended_by(cancel_events[0].seq) == sorted(cancelled)


def test_cancel_is_one_statement_set_whatever_the_subtree_size(tmp_path: Path) -> None:
    def statements_to_cancel(fanout: int) -> int:
        from firm.store import open_store

        store = open_store(tmp_path / f"c{fanout}.db")
        run = RunSpec("", "<t>", "simulation", {}, str(tmp_path))
        root = store.create_run(run, NewTask("Goal", "", "ceo", "user"))
        store.claim("w", 1, 60)
        for i in range(fanout):
            kid = store.delegate(root.id, 0, NewTask(f"t{i}", "", "m", "ceo", Priority.URGENT)).task
            assert [t.id for t in store.claim("w", 1, 60)] == [kid.id]
            for j in range(3):
                store.delegate(kid.id, 0, NewTask(f"t{i}.{j}", "", "leaf", "m"))
        count = 0

        def counter(*_args: object) -> None:
            nonlocal count
            count += 1

        event.listen(store.engine, "before_cursor_execute", counter)
        cancelled = store.cancel(root.id, "stop")
        assert len(cancelled) == 1 + fanout * 4
        store.close()
        return count

    assert statements_to_cancel(2) == statements_to_cancel(40)


def test_cancelling_a_finished_task_changes_nothing(
    store: SqlStore, three_levels: OrgChart, tmp_path: Path
) -> None:
    with Engine(store, heartbeat=0.2) as engine:
        root = engine.submit(three_levels, "Launch", workspace=tmp_path / "ws")
        engine.run_until(root.id, timeout=60)
        assert engine.cancel(root.id) == []
    assert {t.status for t in store.subtree(root.id)} == {Status.DONE}


def test_a_long_result_is_bounded_in_the_managers_brief(
    store: SqlStore, three_levels: OrgChart, tmp_path: Path
) -> None:
    long_result = "word " * 1000  # 5,000 characters: the file holds it, the brief a bounded part
    briefs: list[str] = []

    def cto(session: Session) -> str | None:
        if session.task.turn == 0:
            session.call("delegate_task", {"assignee": "gabriel", "title": "Write it all",
                                           "description": "everything"})  # fmt: skip
            return None
        briefs.append(session.brief)
        session.call("complete_task", {"result": "merged"})
        return None

    def gabriel(session: Session) -> str | None:
        session.call("files.write", {"path": "all.md", "content": long_result})
        session.call("complete_task", {"result": long_result, "files": ["all.md"]})
        return None

    brain = FunctionBrain({"cto": cto, "gabriel": gabriel})
    with Engine(store, heartbeat=0.2, brain=brain) as engine:
        root = engine.submit(three_levels, "Write", to="cto", workspace=tmp_path / "ws")
        assert engine.run_until(root.id, timeout=30).status == Status.DONE
    (brief,) = briefs
    assert "more characters; see the files]" in brief
    assert "files: all.md" in brief
    assert len(brief) < 3000  # the whole result is 5,000 characters on its own
    assert store.children(root.id)[0].result == long_result  # stored whole


FOUR_LEVELS = """\
company: Test Co
agents:
  - {id: ceo, name: Ava, title: Chief Executive Officer}
  - {id: vp, name: Vic, title: Vice President, reports_to: ceo}
  - {id: lead, name: Lee, title: Team Lead, reports_to: vp}
  - {id: eng, name: Eve, title: Engineer, reports_to: lead}
"""


def test_a_cancel_reaches_work_still_open_below_a_manager_that_already_finished(
    store: SqlStore, org_factory: Callable[[str], OrgChart], tmp_path: Path
) -> None:
    # A manager may complete (or fail) while its report still works: nothing waits for the
    # report then, but cancelling above the manager must still stop it. So the cancel's walk
    # cannot follow open tasks only (an ended task can have open subtasks).
    sim = SimulationBrain(latency=0.0)
    stopped: list[str] = []
    working: list[str] = []

    def lead(session: Session) -> str | None:
        session.call("delegate_task", {"assignee": "eng", "title": "Build it",
                                       "description": "all of it"})  # fmt: skip
        session.call("complete_task", {"result": "handed to eng; not waiting for it"})
        return None

    brain = FunctionBrain({"lead": lead, "eng": slow_job(stopped, 500, working)}, default=sim.run)
    with Engine(store, max_concurrent=4, heartbeat=0.2, brain=brain) as engine:
        root = engine.submit(org_factory(FOUR_LEVELS), "Launch", workspace=tmp_path / "ws")
        deadline = time.monotonic() + 20
        while True:
            tasks = {t.assignee: t for t in store.subtree(root.id)}
            if "eng" in working and tasks["lead"].status == Status.DONE:
                break
            assert time.monotonic() < deadline, "eng never started, or lead never finished"
            time.sleep(0.02)
        cancelled = engine.cancel(tasks["vp"].id, "the track is dropped")
        assert tasks["eng"].id in cancelled
        deadline = time.monotonic() + 20
        while not stopped:
            assert time.monotonic() < deadline, "eng's session never stopped"
            time.sleep(0.02)
    after = {t.assignee: t for t in store.subtree(root.id)}
    assert after["eng"].status == Status.CANCELLED
    assert after["lead"].status == Status.DONE  # an ending is never rewritten
    (entry,) = [e for e in store.events_after(0, 10_000) if e.kind == "cancelled"]
    assert entry.task_id == tasks["vp"].id
    assert store.ended_by(entry.seq) == sorted(cancelled)
