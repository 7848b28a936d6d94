"""Waking workers on PostgreSQL: a commit that makes tasks todo wakes one worker process, not
every one of them (store/wakeup.py), yet every task is done and none is claimed twice; a
cancel still stops the sessions it concerns on every worker."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest
from test_workers import Workers, wait_terminal
from tests.support import firm_cli

from firm.store import open_store
from firm.tasks import Status

pytestmark = pytest.mark.timeout(240)

COUNTS = re.compile(r"worker (\S+): (\d+) claims, (\d+) found nothing; woken (\d+) times")


def wide_company(managers: int, reports: int) -> str:
    lines = ["company: Wide Co", "max_concurrent: 16", "agents:"]
    lines.append("  - {id: ceo, name: Ceo, title: Chief Executive Officer}")
    for m in range(managers):
        lines.append(f"  - {{id: m{m}, name: M{m}, title: Engineering Manager, reports_to: ceo}}")
        for r in range(reports):
            lines.append(
                f"  - {{id: e{m}x{r}, name: E{m}x{r}, title: Backend Engineer, reports_to: m{m}}}"
            )
    return "\n".join(lines) + "\n"


def submit(url: str, tmp_path: Path, org_text: str, latency: float, linger: float = 0.0) -> str:
    org = tmp_path / f"company-{time.monotonic_ns()}.yaml"
    org.write_text(org_text, encoding="utf-8")
    out = firm_cli(
        "submit",
        str(org),
        "Build the product",
        "--db",
        url,
        "--workspace",
        str(tmp_path / "ws"),
        "--sim-latency",
        str(latency),
        "--sim-linger",
        str(linger),
        "--json",
        cwd=tmp_path,
        check=True,
    )
    return json.loads(out.stdout)["id"]


@pytest.fixture
def workers(pg_url: str, tmp_path: Path):
    w = Workers(pg_url, tmp_path)
    yield w
    w.stop()


def test_new_tasks_wake_one_worker_not_all_and_every_task_is_done_once(workers, pg_url, tmp_path):
    # Four slots a worker: a manager's six reports never fit in the committing worker alone,
    # so spreading is the wake-up rule's doing (the rest handed on), not the timing's.
    for i in range(4):
        workers.start(f"w{i}", "--max-concurrent", "4", "--heartbeat", "1")
    workers.wait_ready()
    root_id = submit(pg_url, tmp_path, wide_company(4, 6), latency=0.02)
    store = open_store(pg_url)
    try:
        wait_terminal(store, root_id, workers)
        tasks = store.subtree(root_id)
        assert len(tasks) == 1 + 4 + 4 * 6
        assert all(t.status == Status.DONE for t in tasks), Counter(str(t.status) for t in tasks)
        events = [e for e in store.events_after(0, 100_000) if e.task_id in {t.id for t in tasks}]
    finally:
        store.close()
    # None claimed twice: one start per task and turn, one completion per task.
    starts = Counter((e.task_id, e.data["turn"]) for e in events if e.kind == "started")
    assert set(starts.values()) == {1}, [k for k, n in starts.items() if n > 1]
    assert set(Counter(e.task_id for e in events if e.kind == "completed").values()) == {1}
    # The work still spread over the workers (hand-offs pass what one cannot take to the next).
    assert len({e.data["worker"] for e in events if e.kind == "started"}) >= 2
    workers.stop()
    logs = workers.logs()
    counts = {m[1]: int(m[4]) for m in COUNTS.finditer(logs)}
    assert set(counts) == {"w0", "w1", "w2", "w3"}, logs
    # Every worker woken by every commit (the herd) would be about 4 wake-ups per task; one
    # worker per commit is at most one per task, plus each worker's wake at connecting.
    woken = sum(counts.values())
    assert woken <= len(tasks) + len(counts), counts


def lingering_on_every_worker(store, root_id: str, n: int) -> None:  # type: ignore[no-untyped-def]
    """Wait until n sessions of the run are running, spread over three workers."""
    deadline = time.monotonic() + 90
    while True:
        running = [t for t in store.subtree(root_id) if t.status == Status.IN_PROGRESS]
        if len(running) == n and len({t.worker_id for t in running}) == 3:
            return
        assert time.monotonic() < deadline, f"sessions never filled the workers: {running}"
        time.sleep(0.1)


def test_new_work_reaches_every_worker_with_room_and_a_cancel_frees_every_worker(
    workers, pg_url, tmp_path
):
    for i in range(3):
        workers.start(f"w{i}", "--max-concurrent", "2")
    workers.wait_ready()
    store = open_store(pg_url)
    try:
        # Seven agents whose sessions would wait ten minutes, three workers of two slots: new
        # work must keep reaching whichever worker still has room until all six are taken.
        first = submit(pg_url, tmp_path, wide_company(1, 5), latency=0.02, linger=600)
        lingering_on_every_worker(store, first, 6)
        store.cancel(first, "the plan changed", "user")
        assert all(t.status == Status.CANCELLED for t in store.subtree(first))
        # The same again: six sessions at once fit only if the cancel stopped the sessions on
        # every worker and freed their slots.
        second = submit(pg_url, tmp_path, wide_company(1, 5), latency=0.02, linger=600)
        lingering_on_every_worker(store, second, 6)
        store.cancel(second, "done testing", "user")
    finally:
        store.close()


def test_the_rotation_agrees_on_one_process_and_hands_on_what_it_has_no_room_for(pg_url):
    """Three listening processes, as PostgreSQL shows them, each deciding for itself: exactly
    one is to claim a commit's tasks; one with too little room names the next in a NOTIFY."""
    import psycopg

    from firm.store import notify
    from firm.store.wakeup import WakeRouter

    names = [f"firm-listen:test-host:{pid}" for pid in (101, 102, 103)]
    conns = [psycopg.connect(pg_url, autocommit=True, application_name=n) for n in names]
    store = open_store(pg_url)
    try:
        conns[2].execute(f"LISTEN {notify.CHANNEL}")
        room = dict.fromkeys(names, 16)
        routers = {n: WakeRouter(store.engine, me=n) for n in names}
        for name, router in routers.items():
            router.add_capacity(lambda name=name: room[name])
        # A commit by a process that does not listen: one listener, picked by seq, claims it.
        for seq in range(1, 7):
            signal = notify.parse(json.dumps({"seq": seq, "todo": 1, "from": "firm-listen:x:9"}))
            woken = [n for n, r in routers.items() if r.route(signal).todo]
            assert woken == [names[seq % 3]], (seq, woken)
        room.update({names[0]: 0, names[1]: 2})
        # Five new tasks made by the process with two free slots: it takes two and names the
        # next process for the other three.
        made = notify.parse(json.dumps({"seq": 50, "todo": 5, "from": names[1]}))
        assert [r.route(made).todo for r in routers.values()] == [0, 0, 0]  # its own: in-process
        handed = [notify.parse(n.payload) for n in conns[2].notifies(timeout=5, stop_after=1)]
        assert [(s.to, s.todo, s.hop) for s in handed] == [(names[2], 3, 1)]
        assert [r.route(handed[0]).todo for r in routers.values()] == [0, 0, 3]
        # A process with no room passes the wake-up on at once; the last hop stops there.
        assert routers[names[0]].route(notify.parse(notify.handoff(60, 2, names[0], 1))).todo == 0
        passed = [notify.parse(n.payload) for n in conns[2].notifies(timeout=5, stop_after=1)]
        assert [(s.to, s.todo, s.hop) for s in passed] == [(names[1], 2, 2)]
        assert routers[names[2]].route(notify.parse(notify.handoff(70, 20, names[2], 2))).todo == 16
        assert routers[names[2]].handoffs == 0  # every listener was asked once: no more hops
    finally:
        store.close()
        for conn in conns:
            conn.close()
