"""Offices served for real: uvicorn on a free loopback port, the engine in the same process,
a fresh SQLite file and workspace per office. Shared by the server tests and the benchmark."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

from firm.server import AccessPolicy, Office, OfficeServer

TOKEN = "test-token-0123456789"


def demo_org(folder: Path) -> Path:
    path = folder / "company.yaml"
    path.write_text(
        resources.files("firm").joinpath("examples/demo.yaml").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    return path


@dataclass
class Running:
    """A live office and how to talk to it."""

    office: Office
    server: OfficeServer
    folder: Path

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def workspace(self) -> Path:
        return self.office.workspace.root

    def client(self, token: str | None = TOKEN, **headers: str) -> httpx.Client:
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def ws(self, query: str = "", **kwargs: Any) -> ClientConnection:
        address = self.url.replace("http://", "ws://") + "/api/ws" + (f"?{query}" if query else "")
        return connect(address, open_timeout=10, max_size=None, **kwargs)

    def submit(self, goal: str, **extra: Any) -> dict[str, Any]:
        with self.client() as c:
            r = c.post("/api/tasks", json={"goal": goal, **extra})
        assert r.status_code == 201, r.text
        return r.json()

    def task(self, task_id: str) -> dict[str, Any]:
        with self.client() as c:
            r = c.get(f"/api/tasks/{task_id}")
        assert r.status_code == 200, r.text
        return r.json()

    def wait_until(self, task_id: str, done: Callable[[dict[str, Any]], bool], timeout: float = 60):
        """Poll the API until done(task detail) holds; the deadline only guards against hangs."""
        deadline = time.monotonic() + timeout
        while True:
            detail = self.task(task_id)
            if done(detail):
                return detail
            if time.monotonic() > deadline:
                raise AssertionError(f"{task_id} never got there: {json.dumps(detail)[:2000]}")
            time.sleep(0.05)

    def finish(self, task_id: str, timeout: float = 60) -> dict[str, Any]:
        """Wait until the run has ended and its session is over. The engine signs a run's end
        (its checkpoint) in a commit of its own just after the one that ended it, and only
        then lets the session go: a test reading the log as soon as the status says done
        could otherwise find it unsigned on a slow machine."""
        terminal = {"done", "failed", "cancelled"}
        detail = self.wait_until(task_id, lambda d: d["status"] in terminal, timeout)
        deadline = time.monotonic() + timeout
        while task_id in self.office.firm.engine.running:
            assert time.monotonic() < deadline, f"{task_id}'s session never ended"
            time.sleep(0.01)
        return detail


def start_office(
    folder: Path,
    *,
    latency: float = 0.0,
    linger: float = 0.0,
    reads_need_token: bool = False,
    hub_buffer: int | None = None,
    fail: list[str] | None = None,
    org: Path | None = None,
) -> Running:
    folder.mkdir(parents=True, exist_ok=True)
    options: dict[str, Any] = {"latency": latency} if latency else {}
    if linger:
        options["linger"] = linger
    if fail:
        options["fail_agents"] = fail
    office = Office(
        org or demo_org(folder),
        db=folder / "firm.db",
        brain_options=options,
        workspace=folder / "workspace",
        policy=AccessPolicy(token=TOKEN, reads_need_token=reads_need_token),
        heartbeat=0.2,
    )
    if hub_buffer is not None:
        office.hub.buffer_size = hub_buffer
    server = OfficeServer(office, "127.0.0.1", 0).start()
    return Running(office, server, folder)
