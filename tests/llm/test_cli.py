"""`firm run --brain llm` as a user runs it, against the scripted server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from firm.testing import ModelServer, ScriptedModel, error, hang
from tests.support import SUBPROCESS_GUARD, firm_cli

GOAL = "Launch an AI note-taking app"
MODEL_VARS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "FIRM_MODEL")


@pytest.fixture
def company(tmp_path: Path) -> Path:
    path = tmp_path / "company.yaml"
    path.write_text(resources.files("firm").joinpath("examples/demo.yaml").read_text())
    return path


@pytest.fixture
def autopilot() -> Iterator[ModelServer]:
    with ModelServer(ScriptedModel()) as server:
        yield server


def bare_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (*MODEL_VARS, "FIRM_DB")}
    env.update(extra)
    return env


def one_line(text: str) -> str:
    return " ".join(text.split())  # the console wraps long lines at its width


def test_run_reports_usage_and_show_sums_it(
    company: Path, autopilot: ModelServer, tmp_path: Path
) -> None:
    env = bare_env(OPENAI_BASE_URL=autopilot.url, OPENAI_API_KEY="sk-test")
    proc = firm_cli(
        "run", str(company), GOAL, "--brain", "llm", "--model", "scripted", "--json",
        "--db", str(tmp_path / "f.db"), "--workspace", str(tmp_path / "ws"),
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["status"] == "done"
    assert summary["counts"] == {"done": 7}
    # The demo company: four leaf tasks (one call each) and three managers (two each).
    assert summary["usage"]["calls"] == 10
    assert summary["usage"]["prompt_tokens"] > 0 and summary["usage"]["completion_tokens"] > 0
    assert all((tmp_path / "ws" / f).is_file() for f in summary["files"])

    shown = firm_cli("show", summary["id"], "--json", "--db", str(tmp_path / "f.db"),
                     cwd=tmp_path, env=env)  # fmt: skip
    assert json.loads(shown.stdout)["tree_usage"] == summary["usage"]
    text = firm_cli("show", summary["id"], "--db", str(tmp_path / "f.db"), cwd=tmp_path, env=env)
    assert "Model usage" in text.stdout and "10 calls" in text.stdout


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        ((), {"OPENAI_API_KEY": "sk-x"}, "no model configured for ceo: pass --model"),
        (("--model", "gpt-4o-mini"), {}, "OPENAI_API_KEY is not set"),
        (
            ("--model", "gpt-4o-mini"),
            {"OPENAI_API_KEY": "sk-abc\u2026def"},
            "OPENAI_API_KEY holds '\u2026' at character 7, which no API key contains",
        ),
    ],
)
def test_a_missing_setting_is_one_clear_error(
    company: Path, tmp_path: Path, args: tuple[str, ...], env: dict[str, str], says: str
) -> None:
    proc = firm_cli(
        "run", str(company), GOAL, "--brain", "llm", *args, "--db", str(tmp_path / "f.db"),
        cwd=tmp_path, env=bare_env(**env),
    )  # fmt: skip
    assert proc.returncode == 2
    assert says in one_line(proc.stderr)
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "f.db").exists() or "T-" not in proc.stdout  # nothing was started


def test_model_options_need_the_llm_brain(company: Path, tmp_path: Path) -> None:
    proc = firm_cli("run", str(company), GOAL, "--model", "gpt-4o", cwd=tmp_path, env=bare_env())
    assert proc.returncode == 2
    assert "apply to --brain llm" in proc.stderr


def test_a_refused_key_says_what_to_fix(company: Path, tmp_path: Path) -> None:
    with ModelServer(ScriptedModel(), api_key="sk-right") as server:
        proc = firm_cli(
            "run", str(company), GOAL, "--brain", "llm", "--model", "scripted",
            "--db", str(tmp_path / "f.db"), cwd=tmp_path,
            env=bare_env(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="sk-wrong"),
        )  # fmt: skip
        assert proc.returncode == 1
        assert "set OPENAI_API_KEY to a valid key" in one_line(proc.stdout)
        assert len(server.requests) == 1


def test_unknown_model_says_what_to_fix(company: Path, tmp_path: Path) -> None:
    model = ScriptedModel()
    model.when().always(error(404, "The model `gpt-9` does not exist"))
    with ModelServer(model) as server:
        proc = firm_cli(
            "run", str(company), GOAL, "--brain", "llm", "--model", "gpt-9", "--db",
            str(tmp_path / "f.db"), cwd=tmp_path,
            env=bare_env(OPENAI_BASE_URL=server.url),
        )  # fmt: skip
        assert proc.returncode == 1
        assert "check --model" in one_line(proc.stdout)


def test_interrupted_mid_call_then_resumed_with_nothing_but_the_store(
    company: Path, tmp_path: Path
) -> None:
    """SIGTERM while a model call hangs: the run stops at once and is saved; `firm resume`
    in a shell with no model settings at all finishes it. The key is never stored."""
    model = ScriptedModel()
    model.when(agent="gabriel").reply(hang())
    db = tmp_path / "f.db"
    secret = "sk-secret-do-not-store-1234"
    with ModelServer(model) as server:
        env = bare_env(OPENAI_BASE_URL=server.url, OPENAI_API_KEY=secret, FIRM_MODEL="scripted")
        run = subprocess.Popen(
            [sys.executable, "-m", "firm", "run", str(company), GOAL, "--brain", "llm",
             "--db", str(db), "--workspace", str(tmp_path / "ws")],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert server.wait_until(
                lambda reqs: any(r.agent == "gabriel" for r in reqs), timeout=SUBPROCESS_GUARD
            )
            run.send_signal(signal.SIGTERM)
            _, err = run.communicate(timeout=60)
        finally:
            run.kill()
        assert run.returncode == 130, err
        assert "firm resume" in err

        resumed = firm_cli("resume", "--json", "--db", str(db), cwd=tmp_path, env=bare_env())
        assert resumed.returncode == 0, resumed.stderr
        (summary,) = json.loads(resumed.stdout)  # resume --json lists the runs it continued
        assert summary["status"] == "done"
        assert {r.headers["authorization"] for r in server.requests[-3:]} == {"Bearer firm-no-key"}

    stored = b"".join(p.read_bytes() for p in tmp_path.glob("f.db*"))
    assert secret.encode() not in stored
    assert b"default_base_url" in stored
