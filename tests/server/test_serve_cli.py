"""`firm serve` as a user runs it: a real process, another `firm run` beside it, Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from office_kit import demo_org
from websockets.sync.client import connect


class Served:
    def __init__(self, proc: subprocess.Popen[str], lines: list[str]):
        self.proc = proc
        self.lines = lines
        self.url = re.search(r"open at (http://\S+)", lines[0]).group(1)  # type: ignore[union-attr]
        self.token = re.search(r"Access token: (\S+)", "\n".join(lines)).group(1)  # type: ignore[union-attr]
        self.rest: list[str] = []
        # Keep reading its output, so a full pipe can never stall the server.
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.rest.append(line)


def serve(folder: Path, *args: str, env: dict[str, str] | None = None) -> Served:
    """Start `firm serve` and read its banner (it prints the address once it listens)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "firm", "serve", "company.yaml", "--port", "0", *args],
        cwd=folder,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.rstrip())
        if line.startswith("Ctrl-C"):
            return Served(proc, lines)
    raise AssertionError("firm serve exited before opening:\n" + "\n".join(lines))


def close(served: Served) -> tuple[int, str]:
    served.proc.send_signal(signal.SIGINT)
    served.proc.wait(timeout=30)
    served.reader.join(timeout=10)
    return served.proc.returncode, "".join(served.rest)


@pytest.fixture
def company(tmp_path: Path) -> Iterator[Path]:
    demo_org(tmp_path)
    yield tmp_path


def test_serve_prints_the_address_and_a_token_and_closes_cleanly(company: Path) -> None:
    served = serve(company, env={"FIRM_TOKEN": ""})
    banner = "\n".join(served.lines)
    assert served.url.startswith("http://127.0.0.1:")
    assert f"{served.url}/#token={served.token}" in banner
    assert len(served.token) >= 30
    assert "/docs" in banner
    with httpx.Client(base_url=served.url) as c:
        assert c.get("/api/org").json()["company"] == "Acme AI"
        denied = c.post("/api/tasks", json={"goal": "Hello"})
        assert denied.status_code == 401
        ok = c.post(
            "/api/tasks",
            json={"goal": "Hello"},
            headers={"Authorization": f"Bearer {served.token}"},
        )
        assert ok.status_code == 201
    code, out = close(served)
    assert code == 0, out
    assert "The office is closed." in out
    assert "Traceback" not in out


def test_ctrl_c_mid_work_ends_the_process_and_frees_its_port(company: Path) -> None:
    served = serve(company, "--db", str(company / "f.db"))
    port = int(served.url.rsplit(":", 1)[1])
    with httpx.Client(base_url=served.url) as c:
        started = c.post(
            "/api/tasks",
            json={"goal": "Open a shop"},
            headers={"Authorization": f"Bearer {served.token}"},
        )
        assert started.status_code == 201
        # Interrupted while the company works: the office closes, the process ends.
        code, out = close(served)
    assert code == 0, out
    assert "The office is closed." in out and "Traceback" not in out
    with socket.socket() as again:  # the address is free for the next office
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))
        again.listen(1)
    with socket.socket() as probe:  # and nothing of the old one still answers there
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_firm_token_chooses_the_token(company: Path) -> None:
    served = serve(company, env={"FIRM_TOKEN": "chosen-by-me"})
    try:
        assert served.token == "chosen-by-me"
        with httpx.Client(base_url=served.url) as c:
            r = c.post(
                "/api/tasks",
                json={"goal": "Hello"},
                headers={"Authorization": "Bearer chosen-by-me"},
            )
            assert r.status_code == 201
    finally:
        close(served)


def test_a_firm_run_in_another_terminal_shows_in_the_office(company: Path) -> None:
    db = company / "shared.db"
    served = serve(company, "--db", str(db))
    try:
        with connect(served.url.replace("http", "ws", 1) + "/api/ws", open_timeout=10) as ws:
            snapshot = json.loads(ws.recv(timeout=30))
            assert snapshot["type"] == "snapshot"
            run = subprocess.run(
                [sys.executable, "-m", "firm", "run", "company.yaml", "Open a shop", "--json"],
                cwd=company,
                env={**os.environ, "FIRM_DB": str(db)},
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert run.returncode == 0, run.stderr
            root = json.loads(run.stdout)["id"]
            # The other process's work arrives on the live feed, in order, to the end.
            seen: list[dict] = []
            while not any(e["task_id"] == root and e["kind"] == "completed" for e in seen):
                seen += json.loads(ws.recv(timeout=30))["events"]
        seqs = [e["seq"] for e in seen]
        assert seqs == list(range(snapshot["seq"] + 1, snapshot["seq"] + 1 + len(seqs)))
        with httpx.Client(base_url=served.url) as c:
            detail = c.get(f"/api/tasks/{root}").json()
        assert detail["status"] == "done" and len(detail["subtree"]) == 6
    finally:
        close(served)


def test_a_busy_port_is_one_clear_error(company: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "firm", "serve", "company.yaml", "--port", str(port)],
            cwd=company,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert "--port" in proc.stderr and "Traceback" not in proc.stderr


def test_a_bad_org_chart_or_brain_is_reported_before_serving(company: Path) -> None:
    (company / "broken.yaml").write_text("company: X\nagents: []\n", encoding="utf-8")
    bad = subprocess.run(
        [sys.executable, "-m", "firm", "serve", "broken.yaml", "--port", "0"],
        cwd=company,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "broken.yaml" in bad.stderr and "agents" in bad.stderr
    brain = subprocess.run(
        [sys.executable, "-m", "firm", "serve", "company.yaml", "--port", "0", "--brain", "x"],
        cwd=company,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert brain.returncode == 2 and "unknown brain 'x'" in brain.stderr


def test_other_commands_do_not_load_the_web_stack() -> None:
    probe = (
        "import sys, firm.cli.main; "
        "print(sorted(m for m in ('fastapi', 'uvicorn', 'starlette') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


def test_listening_on_every_address_prints_addresses_one_can_open() -> None:
    # (Checked without binding: the tests listen on loopback only.)
    from firm.server.serving import http_url, listens_everywhere, local_host, reachable_host

    name = socket.gethostname()
    for wildcard in ("0.0.0.0", "::", ""):
        assert listens_everywhere(wildcard)
        shown = reachable_host(wildcard)
        assert shown not in ("0.0.0.0", "::", "")
        assert shown == name or shown == local_host(wildcard)
    assert http_url(local_host("0.0.0.0"), 8000) == "http://127.0.0.1:8000"
    assert http_url(local_host("::"), 8000) == "http://[::1]:8000"
    for specific in ("127.0.0.1", "192.168.1.20", "office.example", "::1"):
        assert not listens_everywhere(specific)
        assert reachable_host(specific) == local_host(specific) == specific
