"""`firm run --brain crewai` as a user runs it: the demo company to the end, and a run killed
with SIGKILL in the middle of a CrewAI step, resumed from the store alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from firm.api import Firm
from firm.testing import ModelServer, ScriptedModel, hang
from tests.support import firm_cli

GOAL = "Launch an AI note-taking app"


@pytest.fixture
def company(tmp_path: Path) -> Path:
    path = tmp_path / "company.yaml"
    path.write_text(resources.files("firm").joinpath("examples/demo.yaml").read_text())
    return path


def _env(**extra: str) -> dict[str, str]:
    drop = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "FIRM_MODEL", "FIRM_DB")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def test_firm_run_brain_crewai_works_the_demo_company(company: Path, tmp_path: Path) -> None:
    with ModelServer(ScriptedModel()) as server:  # the autopilot: delegate, then merge
        out = firm_cli(
            "run", str(company), GOAL, "--brain", "crewai", "--model", "scripted",
            "--db", str(tmp_path / "f.db"), "--json",
            cwd=tmp_path, env=_env(OPENAI_BASE_URL=server.url),
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        run = json.loads(out.stdout)
        assert run["status"] == "done"
        assert all("Current Task:" in r.request.brief for r in server.requests)  # CrewAI's
    with Firm(tmp_path / "f.db") as firm:
        tree = firm.subtree(run["id"])
        assert len(tree) > 3 and all(t.status == "done" for t in tree)
        calls = sum(t.usage.get("calls", 0) for t in tree)
        assert calls == len(server.requests)  # every model call is in firm's usage


def test_killed_mid_step_then_resumed(company: Path, tmp_path: Path) -> None:
    model = ScriptedModel()
    model.when(agent="gabriel").reply(hang())  # its first call never answers
    db = tmp_path / "f.db"
    with ModelServer(model) as server:
        env = _env(OPENAI_BASE_URL=server.url, FIRM_MODEL="scripted")
        run = subprocess.Popen(
            [sys.executable, "-m", "firm", "run", str(company), GOAL, "--brain", "crewai",
             "--db", str(db), "--workspace", str(tmp_path / "ws")],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert server.wait_until(
                lambda reqs: any(r.agent == "gabriel" for r in reqs), timeout=120
            )
            run.send_signal(signal.SIGKILL)
            run.wait(timeout=30)
        finally:
            run.kill()

        resumed = firm_cli("resume", "--json", "--db", str(db), cwd=tmp_path, env=_env())
        assert resumed.returncode == 0, resumed.stderr
        (summary,) = json.loads(resumed.stdout)
        assert summary["status"] == "done"
        gabriel = [r for r in server.requests if r.agent == "gabriel"]
        assert len(gabriel) >= 2  # the killed call, then the resumed session's
    with Firm(db) as firm:
        assert all(t.status == "done" for t in firm.subtree(summary["id"]))
