"""`firm demo --office`: the office opens on the demo company with its goal already running,
and says where to look."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx


def test_demo_office_opens_with_the_goal_running(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "firm", "demo", "--office", "--port", "0"],
        cwd=tmp_path,
        env={**os.environ, "FIRM_TOKEN": "demo-office-token", "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    banner: list[str] = []
    try:
        for line in proc.stdout:
            banner.append(line.rstrip())
            if line.startswith("Ctrl-C"):
                break
        text = "\n".join(banner)
        url = re.search(r"open at (http://\S+)", text)
        assert url, text
        assert "Open with the token: " in text and "#token=demo-office-token" in text
        assert "Launch an AI note-taking app" in text and "2.5s a turn" in text
        assert "Office tab" in text
        with httpx.Client(base_url=url.group(1), timeout=30) as c:
            tasks = c.get("/api/tasks").json()["tasks"]
        goal = [t for t in tasks if t["title"] == "Launch an AI note-taking app"]
        assert len(goal) == 1 and goal[0]["status"] in ("todo", "in_progress", "waiting")
        assert goal[0]["id"] in text
        # The chart it serves is the demo's, written where the demo keeps its store.
        assert (tmp_path / ".firm" / "demo-company.yaml").read_text(encoding="utf-8")
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    assert "The office is closed." in rest
