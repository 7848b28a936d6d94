"""Worker processes (`python -m firm worker`) sharing one PostgreSQL database.

Four workers finish a deep company with every task done once while two watchers see every
event in order; a worker killed with SIGKILL mid-session loses its task to another worker when
its lease expires; a worker whose database connections are cut mid-session recovers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from tests.support import SUBPROCESS_GUARD, firm_cli

from firm.store import SqlStore, open_store
from firm.tasks import Status

pytestmark = pytest.mark.timeout(240)

HERE = Path(__file__).parent

# Fifteen agents, four levels: every manager waits on its reports and merges their work.
DEEP = """\
company: Deep Co
max_concurrent: 4
agents:
  - {id: ceo, name: Ava, title: Chief Executive Officer}
  - {id: cto, name: Ben, title: Chief Technology Officer, reports_to: ceo}
  - {id: cmo, name: Cleo, title: Chief Marketing Officer, reports_to: ceo}
  - {id: be_lead, name: Dan, title: Engineering Manager Backend, reports_to: cto}
  - {id: fe_lead, name: Eve, title: Engineering Manager Frontend, reports_to: cto}
  - {id: brand, name: Fay, title: Head of Brand, reports_to: cmo}
  - {id: growth, name: Gus, title: Head of Growth, reports_to: cmo}
  - {id: api, name: Hal, title: Backend Engineer, reports_to: be_lead}
  - {id: db, name: Ida, title: Data Engineer, reports_to: be_lead}
  - {id: web, name: Jo, title: Web Engineer, reports_to: fe_lead}
  - {id: mobile, name: Kai, title: Mobile Engineer, reports_to: fe_lead}
  - {id: writer, name: Lu, title: Content Writer, reports_to: brand}
  - {id: designer, name: Mo, title: Designer, reports_to: brand}
  - {id: seo, name: Ned, title: SEO Specialist, reports_to: growth}
  - {id: ads, name: Oz, title: Performance Marketing Lead, reports_to: growth}
"""
AGENTS = 15


class Workers:
    """Worker processes on one database, each logging to a file in the test's folder."""

    def __init__(self, url: str, cwd: Path):
        self.url = url
        self.cwd = cwd
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *options: str) -> subprocess.Popen[bytes]:
        log = open(self.cwd / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
        env = {k: v for k, v in os.environ.items() if k != "FIRM_DB"}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "firm",
                "worker",
                "--db",
                self.url,
                "--worker-id",
                name,
                "--heartbeat",
                "0.2",
                *options,
            ],
            cwd=self.cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self.procs[name] = proc
        return proc

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def wait_ready(self, limit: float = SUBPROCESS_GUARD) -> None:
        """Wait until every started worker has printed its start-up line."""
        deadline = time.monotonic() + limit
        for name in self.procs:
            log = self.cwd / f"{name}.log"
            while f"worker {name} on" not in log.read_text(errors="replace"):
                if time.monotonic() > deadline:
                    raise AssertionError(f"worker {name} did not start:\n" + self.logs())
                time.sleep(0.05)

    def logs(self) -> str:
        return "\n".join(
            f"--- {name}\n{(self.cwd / f'{name}.log').read_text(errors='replace')[-3000:]}"
            for name in self.procs
        )


@pytest.fixture
def workers(pg_url: str, tmp_path: Path):
    w = Workers(pg_url, tmp_path)
    yield w
    w.stop()


def submit(url: str, tmp_path: Path, latency: float, linger: float = 0.0) -> str:
    org = tmp_path / "company.yaml"
    org.write_text(DEEP, encoding="utf-8")
    out = firm_cli(
        "submit",
        str(org),
        "Launch an AI note-taking app",
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


def wait_terminal(store: SqlStore, root_id: str, workers: Workers, limit: float = 150) -> None:
    deadline = time.monotonic() + limit
    while not store.get_task(root_id).terminal:
        if time.monotonic() > deadline:
            tasks = store.subtree(root_id)
            raise AssertionError(
                f"the run did not finish: {Counter(str(t.status) for t in tasks)}\n"
                + workers.logs()
            )
        time.sleep(0.2)


def assert_every_task_done_once(store: SqlStore, root_id: str) -> list:
    tasks = store.subtree(root_id)
    assert len(tasks) == AGENTS, "a subtask was created twice, or never"
    assert Counter(t.assignee for t in tasks) == Counter(
        {a: 1 for a in {t.assignee for t in tasks}}
    )
    assert all(t.status == Status.DONE for t in tasks), [
        (t.assignee, t.status, t.error) for t in tasks
    ]
    events = store.events_after(0, 100_000)
    completed = Counter(e.task_id for e in events if e.kind == "completed")
    assert all(completed[t.id] == 1 for t in tasks), "a task was completed twice"
    return events


def test_four_workers_finish_a_deep_company_while_two_watchers_see_every_event(
    workers, pg_url, pg_server, tmp_path
):
    # The workers are up before the goal arrives: a worker still importing when the work is
    # handed out would leave it all to the first one ready, on a loaded machine.
    for i in range(4):
        workers.start(f"w{i}", "--max-concurrent", "3")
    workers.wait_ready()
    root_id = submit(pg_url, tmp_path, latency=0.05)
    watchers = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "watch_events.py"),
                pg_url,
                root_id,
                str(tmp_path / f"watch{i}"),
            ],
            cwd=tmp_path,
        )
        for i in range(2)
    ]
    store = open_store(pg_url)
    try:
        # Cut the watchers' LISTEN connections once mid-run: they must reconnect without a gap.
        while len(store.list_tasks(root_id=root_id)) < 5:
            time.sleep(0.05)
        for w in watchers:
            pg_server.terminate(f"firm-listen:%:{w.pid}")
        wait_terminal(store, root_id, workers)
        events = assert_every_task_done_once(store, root_id)
        used = {e.data.get("worker") for e in events if e.kind == "started"}
        assert len(used) >= 2, f"the work was not shared among the workers: {used}"
        for w in watchers:
            assert w.wait(60) == 0
        last = next(e.seq for e in events if e.task_id == root_id and e.kind == "completed")
        expected = [f"{e.seq} {e.kind} {e.task_id}" for e in events if e.seq <= last]
        for i in range(2):
            seen = (tmp_path / f"watch{i}").read_text().splitlines()
            assert seen == expected, f"watcher {i} missed, repeated or reordered events"
    finally:
        for w in watchers:
            if w.poll() is None:
                w.kill()
        store.close()


def test_a_worker_killed_mid_session_loses_its_task_to_another_after_its_lease(
    workers, pg_url, pg_server, tmp_path
):
    # Each session lingers after acting, so the victim dies holding a manager that has
    # already delegated: its re-run must find those subtasks, not make new ones.
    root_id = submit(pg_url, tmp_path, latency=0.3, linger=2.0)
    victim = workers.start("victim", "--max-concurrent", "2", "--lease-seconds", "2")
    store = open_store(pg_url)
    try:
        deadline = time.monotonic() + SUBPROCESS_GUARD
        while not [t for t in store.list_tasks(status="in_progress") if store.children(t.id)]:
            assert time.monotonic() < deadline, workers.logs()
            time.sleep(0.05)
        # Killed at once, and what it held read only once its connections are gone: nothing
        # of it can commit after that, and no survivor (started after) can have taken its
        # tasks yet. A pause between seeing and killing let the manager's session end first
        # on a loaded machine.
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        while pg_server.terminate(f"firm-%:%:{victim.pid}"):
            assert time.monotonic() < deadline, "the victim's connections never closed"
            time.sleep(0.05)
        held = [t.id for t in store.list_tasks(status="in_progress") if t.worker_id == "victim"]
        assert held, "the victim held no session when killed"
        delegated_before = {tid: [c.id for c in store.children(tid)] for tid in held}
        assert any(delegated_before.values()), "the victim had delegated nothing yet"
        for i in range(3):
            workers.start(f"w{i}", "--max-concurrent", "3", "--lease-seconds", "2")
        wait_terminal(store, root_id, workers)
        events = assert_every_task_done_once(store, root_id)
        for tid, kids in delegated_before.items():  # the re-run replayed, it did not re-create
            assert [c.id for c in store.children(tid)][: len(kids)] == kids
            assert len(store.children(tid)) == len({c.assignee for c in store.children(tid)})
        for tid in held:
            requeued = [e.data for e in events if e.task_id == tid and e.kind == "requeued"]
            assert requeued and requeued[0]["worker"] == "victim"
            assert requeued[0]["cause"] == "lease_expired"
            starts = [e.data for e in events if e.task_id == tid and e.kind == "started"]
            assert starts[0]["worker"] == "victim" and starts[-1]["worker"] != "victim"
            assert starts[-1]["attempt"] == len(starts) >= 2
    finally:
        store.close()


def test_a_worker_whose_connections_are_cut_mid_session_carries_on(
    workers, pg_url, pg_server, tmp_path
):
    root_id = submit(pg_url, tmp_path, latency=0.5)
    proc = workers.start("solo", "--max-concurrent", "4", "--lease-seconds", "5")
    store = open_store(pg_url)
    try:
        cuts = 0
        deadline = time.monotonic() + 120
        while not store.get_task(root_id).terminal and cuts < 3:
            assert time.monotonic() < deadline, workers.logs()
            if store.list_tasks(status="in_progress"):
                cuts += pg_server.terminate(f"firm-%:%:{proc.pid}") > 0
                time.sleep(1.0)
            time.sleep(0.05)
        assert cuts == 3
        wait_terminal(store, root_id, workers)
        assert_every_task_done_once(store, root_id)
        assert proc.poll() is None, "the worker died"
    finally:
        store.close()


def test_firm_run_with_a_postgres_url_submits_works_and_waits(pg_url, tmp_path):
    org = tmp_path / "company.yaml"
    org.write_text(DEEP, encoding="utf-8")
    out = firm_cli(
        "run",
        str(org),
        "Plan the offsite",
        "--workspace",
        str(tmp_path / "ws"),
        "--json",
        cwd=tmp_path,
        env={"FIRM_DB": pg_url},
        check=True,
    )
    summary = json.loads(out.stdout)
    assert summary["status"] == "done" and summary["counts"] == {"done": AGENTS}
