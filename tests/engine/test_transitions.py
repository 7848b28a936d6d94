"""tasks.TRANSITIONS is the state machine the engine follows: every status change the log
records in real runs — the simulation brain, a failure, a cancel, a revoke, crash recovery,
a manager whose reports finished before its turn ended — is in the table, and every move in
the table is one some run makes."""

from __future__ import annotations

import time
from pathlib import Path

from firm.brains.simulation import SimulationBrain
from firm.engine import Engine
from firm.events import status_changes, transition_problems
from firm.org import OrgChart
from firm.session import Session
from firm.store import NewTask, RunSpec, SqlStore
from firm.tasks import TRANSITIONS, Status
from firm.testing import FunctionBrain

RUN = RunSpec("", "<test>", "simulation", {}, "/tmp/unused")


def _wait_for(check, what: str, timeout: float = 20) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.02)


def test_every_status_change_in_real_runs_is_in_the_table_and_the_table_is_all_used(
    store: SqlStore, three_levels: OrgChart, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    sim = SimulationBrain(latency=0.0)

    # Cancel and revoke: slow leaves are cut off while they run, their manager while it waits.
    def slow_leaf(session: Session) -> str | None:
        while True:
            session.sleep(0.02)
            session.check_cancelled()

    brain = FunctionBrain({"gabriel": slow_leaf, "hana": slow_leaf}, default=sim.run)
    with Engine(store, max_concurrent=8, heartbeat=0.1, brain=brain) as engine:
        root = engine.submit(three_levels, "Launch the app", workspace=ws)
        _wait_for(
            lambda: (
                {"gabriel", "hana"} <= {t.assignee for t in store.list_tasks(status="in_progress")}
            ),
            "the leaves starting",
        )
        tree = {t.assignee: t for t in store.subtree(root.id)}
        engine.cancel(tree["gabriel"].id, "not needed")
        engine.revoke(tree["cto"].id, "the technical track is dropped")
        assert engine.run_until(root.id, timeout=60).status == Status.DONE

    # Failure climbs: the CMO's reports both fail, then the CMO.
    failing = FunctionBrain({}, default=SimulationBrain(fail_agents=["maya", "omar"]).run)
    with Engine(store, max_concurrent=8, heartbeat=0.1, brain=failing) as engine:
        root = engine.submit(three_levels, "Launch it again", workspace=ws)
        engine.run_until(root.id, timeout=60)

    # A manager whose report finished before its turn ended: it goes straight back to todo.
    def patient_ceo(session: Session) -> str | None:
        if session.task.turn == 0:
            kid = session.delegate("cmo", "Plan", "Plan it.")
            _wait_for(lambda: session.store.get_task(kid).terminal, "the report finishing")
            return None
        return sim.run(session)

    patient = FunctionBrain({"ceo": patient_ceo}, default=sim.run)
    with Engine(store, max_concurrent=8, heartbeat=0.1, brain=patient) as engine:
        root = engine.submit(three_levels, "Patiently", workspace=ws)
        assert engine.run_until(root.id, timeout=60).status == Status.DONE

    # A goal cancelled before anyone picks it up.
    queued = store.create_run(RUN, NewTask("Never started", "", "ceo", "user"))
    store.cancel(queued.id, "changed my mind")
    # A session whose worker went away and whose lease ran out: recovery requeues it.
    lost = store.create_run(RUN, NewTask("Lost", "", "ceo", "user"))
    assert [t.id for t in store.claim("elsewhere:1:gone", 1, -1)] == [lost.id]
    assert store.recover(lambda worker: None)["requeued"] == [lost.id]

    log = [(e.seq, e.kind, e.task_id) for e in store.events_after(0, 100_000)]
    assert transition_problems(log) == []
    made = {(c.old, c.new) for c in status_changes(log) if c.old is not None}
    table = {(old, new) for old, news in TRANSITIONS.items() for new in news}
    assert made == table, f"in the table, made by no run: {table - made}"
    woken_at_once = [e for e in store.events_after(0, 100_000) if e.data.get("immediately")]
    assert woken_at_once, "no manager went straight back to todo"
