"""Two offices (`firm serve`) on one PostgreSQL database, with a `firm worker` beside them: each
runs its own engine, so any of three processes may run a session, and a person watching either
office's live feed sees every event of the log, in order, with no gap and nothing twice.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.support import SUBPROCESS_GUARD
from websockets.sync.client import connect

from firm.store import open_store

pytestmark = pytest.mark.timeout(180)

TOKEN = "pg-office-token-0123456789"
GOALS = ("Launch an AI note-taking app", "Write the quarterly report")


class Served:
    """One `firm serve` process and its address."""

    def __init__(self, proc: subprocess.Popen[str], banner: list[str]):
        self.proc = proc
        self.banner = banner
        found = re.search(r"open at (http://\S+)", banner[0])
        assert found, banner
        self.url = found.group(1)
        self.output: list[str] = []
        # Keep reading its output, so a full pipe can never stall the server.
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line.rstrip())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def env_without_db() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "FIRM_DB"}


def serve(folder: Path, db: str) -> Served:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "firm",
            "serve",
            "company.yaml",
            "--db",
            db,
            "--port",
            "0",
            "--workspace",
            str(folder / "workspace"),
            "--sim-latency",
            "0.1",
        ],
        cwd=folder,
        env={**env_without_db(), "FIRM_TOKEN": TOKEN, "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    banner: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        banner.append(line.rstrip())
        if line.startswith("Ctrl-C"):
            return Served(proc, banner)
    proc.wait()
    raise AssertionError("firm serve did not open:\n" + "\n".join(banner))


class Watcher:
    """Reads one office's live feed from the start of the log, in a thread of its own."""

    def __init__(self, url: str):
        self.closing = ExitStack()
        self.ws = self.closing.enter_context(
            connect(
                url.replace("http://", "ws://") + "/api/ws?after=0", open_timeout=30, max_size=None
            )
        )
        first = json.loads(self.ws.recv(timeout=30))
        assert first["type"] == "snapshot", first
        self.events: list[dict[str, Any]] = []
        self.until: int | None = None  # read up to this seq, then stop
        self.problem: str | None = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                if self.until is not None and self.events and self.events[-1]["seq"] >= self.until:
                    return
                try:
                    message = json.loads(self.ws.recv(timeout=0.5))
                except TimeoutError:
                    continue
                assert message["type"] == "events", message
                self.events += message["events"]
            self.problem = "the feed stopped before the end of the log"
        except Exception as exc:  # reported by the test, not lost in this thread
            self.problem = f"{type(exc).__name__}: {exc}"

    def finish(self, last_seq: int) -> list[dict[str, Any]]:
        self.until = last_seq
        self.thread.join(150)
        self.closing.close()
        assert self.problem is None, self.problem
        return self.events


@pytest.fixture
def company(tmp_path: Path) -> Path:
    demo = resources.files("firm").joinpath("examples/demo.yaml").read_text(encoding="utf-8")
    (tmp_path / "company.yaml").write_text(demo, encoding="utf-8")
    return tmp_path


@pytest.fixture
def offices(company: Path, pg_url: str) -> Iterator[list[Served]]:
    started: list[Served] = []
    worker: subprocess.Popen[bytes] | None = None
    try:
        started += [serve(company, pg_url), serve(company, pg_url)]
        log = open(company / "worker.log", "wb")  # noqa: SIM115 (closed with the process)
        worker = subprocess.Popen(
            [sys.executable, "-m", "firm", "worker", "--db", pg_url, "--worker-id", "worker"],
            cwd=company,
            env=env_without_db(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + SUBPROCESS_GUARD
        while "up to" not in (company / "worker.log").read_text(errors="replace"):
            assert worker.poll() is None and time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.05)
        yield started
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
        for served in started:
            served.close()


def test_two_offices_on_postgres_each_see_every_event_in_order(
    offices: list[Served], pg_url: str
) -> None:
    watchers = [Watcher(served.url) for served in offices]
    roots = []
    # One goal through each office's API: both runs go on in all three engines at once.
    for served, goal in zip(offices, GOALS, strict=True):
        auth = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=served.url, headers=auth, timeout=30) as c:
            r = c.post("/api/tasks", json={"goal": goal})
        assert r.status_code == 201, r.text
        roots.append(r.json()["id"])

    store = open_store(pg_url)
    try:
        deadline = time.monotonic() + 90
        while not all(store.get_task(root).terminal for root in roots):
            assert time.monotonic() < deadline, [o.output for o in offices]
            time.sleep(0.1)
        assert all(store.get_task(root).status == "done" for root in roots)
        last = store.last_seq()
        log = [json.loads(json.dumps(e.to_dict())) for e in store.events_after(0, 100_000)]
    finally:
        store.close()
    log = [e for e in log if e["seq"] <= last]
    assert [e["seq"] for e in log] == list(range(1, last + 1))
    assert {e["task_id"] for e in log if e["kind"] == "completed"} >= set(roots)

    for i, watcher in enumerate(watchers):
        seen = [e for e in watcher.finish(last) if e["seq"] <= last]
        assert [e["seq"] for e in seen] == [e["seq"] for e in log], (
            f"office {i} missed, repeated or reordered events"
        )
        assert seen == log, f"office {i} sent an event other than the one in the log"
