"""`firm team run` as a user runs it — and a team whose process is killed, continued."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from firm.store import open_store
from firm.tasks import Status
from firm.testing import ModelServer, ScriptedModel, hang, text
from tests.support import SUBPROCESS_GUARD, firm_cli
from tests.teams.conftest import pick

TEAM = """\
name: Content team
process: hierarchical
inputs: {topic: AI agents}
agents:
  researcher:
    role: Researcher of {topic}
  writer:
    role: Writer
tasks:
  research:
    description: Research {topic}
    agent: researcher
  write:
    description: Write an article about {topic}
    agent: writer
"""
MODEL_VARS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "FIRM_MODEL", "FIRM_DB")


def bare_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in MODEL_VARS}
    return {**env, **extra}


@pytest.fixture
def team_file(tmp_path: Path) -> Path:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM)
    return path


def test_run_prints_the_result_and_json_gives_every_output(
    model: ScriptedModel, server: ModelServer, team_file: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(pick("research", "researcher"), pick("write", "writer"))
    model.when(agent="researcher").reply(text("Notes."))
    model.when(agent="writer").reply(text("The article."))
    env = bare_env(**server.env())
    db = str(tmp_path / "f.db")
    proc = firm_cli("team", "run", str(team_file), "--db", db, "--verbose", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "Content team · hierarchical · 2 task(s)" in out
    assert "[manager] turn 1: research → researcher" in out
    assert "The article." in out
    assert "Team tasks: research done, write done" in out
    assert "Research AI agents" in server.requests_for("researcher")[0].request.brief

    model.when(agent="researcher").reply(text("More notes."))
    model.when(agent="writer").reply(text("Another article."))
    model.when(agent="manager").reply(pick("research", "researcher"), pick("write", "writer"))
    proc = firm_cli(
        "team", "run", str(team_file), "--db", db, "--json", "--input", "topic=robots",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "done"
    assert result["task_results"] == {"research": "More notes.", "write": "Another article."}
    assert [t["task_id"] for t in result["manager"]["turns"]] == ["research", "write"]
    assert "Research robots" in server.requests_for("researcher")[1].request.brief


def test_a_failed_run_exits_1_with_the_reason(
    model: ScriptedModel, server: ModelServer, team_file: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").always(pick("research", "nobody"))
    proc = firm_cli(
        "team", "run", str(team_file), "--db", str(tmp_path / "f.db"), "--json",
        cwd=tmp_path, env=bare_env(**server.env()),
    )  # fmt: skip
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["manager"]["status"] == "failed"
    assert "4 invalid answers in a row" in result["error"]


def test_running_a_finished_team_again_shows_its_outputs_without_a_model_call(
    model: ScriptedModel, server: ModelServer, team_file: Path, tmp_path: Path
) -> None:
    model.when(agent="manager").reply(pick("research", "researcher"), pick("write", "writer"))
    model.when(agent="researcher").reply(text("Notes."))
    model.when(agent="writer").reply(text("The article."))
    env = bare_env(**server.env())
    db = tmp_path / "f.db"
    first = firm_cli("team", "run", str(team_file), "--db", str(db), "--json", cwd=tmp_path,
                     env=env)  # fmt: skip
    assert first.returncode == 0, first.stderr
    asked = len(server.requests)

    # Each run is a new process: the store alone says the team is done.
    again = firm_cli("team", "run", str(team_file), "--db", str(db), cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr
    run_id = json.loads(first.stdout)["run_id"]
    out = " ".join(again.stdout.split())
    assert f"done earlier in {run_id}; its outputs stand (--fresh runs it again)" in out
    assert "The article." in out
    assert "Team tasks: research done, write done" in out
    as_json = firm_cli("team", "run", str(team_file), "--db", str(db), "--json", cwd=tmp_path,
                       env=env)  # fmt: skip
    assert json.loads(as_json.stdout) == json.loads(first.stdout)
    assert len(server.requests) == asked  # no model call
    assert len(roots(db)) == 1  # and no new run

    # --fresh runs every task again, in a new run.
    model.when(agent="manager").reply(pick("research", "researcher"), pick("write", "writer"))
    model.when(agent="researcher").reply(text("Newer notes."))
    model.when(agent="writer").reply(text("A new article."))
    fresh = firm_cli("team", "run", str(team_file), "--db", str(db), "--fresh", "--json",
                     cwd=tmp_path, env=env)  # fmt: skip
    assert fresh.returncode == 0, fresh.stderr
    result = json.loads(fresh.stdout)
    assert result["run_id"] != run_id
    assert result["task_results"] == {"research": "Newer notes.", "write": "A new article."}
    assert len(server.requests) == asked + 4
    # The latest finished run is the one a plain run shows from now on.
    latest = firm_cli("team", "run", str(team_file), "--db", str(db), "--json", cwd=tmp_path,
                      env=env)  # fmt: skip
    assert json.loads(latest.stdout)["run_id"] == result["run_id"]
    assert len(server.requests) == asked + 4


def roots(db: Path) -> list[str]:
    store = open_store(db)
    try:
        return [t.id for t in store.list_tasks() if t.parent_id is None]
    finally:
        store.close()


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (("--input", "topic"), {}, "'topic' is not KEY=VALUE"),
        (("--process", "parallel"), {}, "'parallel' is not a process"),
        ((), {}, "OPENAI_API_KEY is not set"),
    ],
)
def test_usage_mistakes_are_one_clear_line(
    team_file: Path, tmp_path: Path, args: tuple[str, ...], env: dict[str, str], says: str
) -> None:
    proc = firm_cli("team", "run", str(team_file), *args, "--db", str(tmp_path / "f.db"),
                    cwd=tmp_path, env=bare_env(**env))  # fmt: skip
    assert proc.returncode == 2
    assert says in " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr


def test_a_bad_team_file_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "team.yaml").write_text(TEAM.replace("    agent: writer\n", "    agent: editor\n"))
    proc = firm_cli("team", "run", "team.yaml", cwd=tmp_path, env=bare_env())
    assert proc.returncode == 2
    assert " ".join(proc.stderr.split()) == (
        "error: team.yaml:15: tasks.write.agent: 'editor' names no agent (known: researcher, "
        "writer)"
    )


def run_killed_mid_task(args: list[str], model: ScriptedModel, server: ModelServer, cwd: Path):
    """Start a team run in a subprocess, SIGKILL it while the writer's model call hangs."""
    model.when(agent="manager").reply(pick("research", "researcher"), pick("write", "writer"))
    model.when(agent="researcher").reply(text("Notes."))
    model.when(agent="writer").reply(hang(), text("The article."))
    proc = subprocess.Popen(
        [sys.executable, *args], cwd=cwd, env=bare_env(**server.env()),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.wait_until(
            lambda reqs: any(r.agent == "writer" for r in reqs), SUBPROCESS_GUARD
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def assert_finished_once(db: Path, server: ModelServer) -> None:
    store = open_store(db)
    try:
        (root,) = [t for t in store.list_tasks() if t.parent_id is None]
        tree = store.subtree(root.id)
        assert {t.status for t in tree} == {Status.DONE}
        assert Counter(t.assignee for t in tree) == Counter(
            {"coordinator": 1, "manager": 2, "researcher": 1, "writer": 1}
        )
        completed = Counter(e.task_id for e in store.events_after(0, 100_000)
                            if e.kind == "completed")  # fmt: skip
        assert set(completed) == {t.id for t in tree} and max(completed.values()) == 1
        assert any(e.kind == "requeued" for e in store.events_after(0, 100_000))
    finally:
        store.close()
    # The manager was asked twice and the researcher once: only the killed call was repeated.
    asked = Counter(r.agent for r in server.requests)
    assert asked == Counter({"manager": 2, "researcher": 1, "writer": 2})


def test_a_killed_team_run_continues_when_run_again(
    model: ScriptedModel, server: ModelServer, team_file: Path, tmp_path: Path
) -> None:
    db = tmp_path / "f.db"
    run_killed_mid_task(
        ["-m", "firm", "team", "run", str(team_file), "--db", str(db)], model, server, tmp_path
    )
    proc = firm_cli("team", "run", str(team_file), "--db", str(db), cwd=tmp_path,
                    env=bare_env(**server.env()))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "continuing T-" in " ".join(proc.stdout.split())
    assert "The article." in proc.stdout
    assert_finished_once(db, server)


def test_a_killed_team_script_resumes_from_the_store_alone(
    model: ScriptedModel, server: ModelServer, tmp_path: Path
) -> None:
    script = tmp_path / "article.py"
    script.write_text(
        textwrap.dedent(
            """\
            from firm import Agent, Task, Team

            researcher = Agent(name="researcher", role="Research topics")
            writer = Agent(name="writer", role="Write content")
            team = Team(
                agents=[researcher, writer],
                tasks=[Task(name="research", description="Research AI", agent=researcher),
                       Task(name="write", description="Write it up", agent=writer)],
                process="hierarchical",
                db="state.db",
            )
            print(team.start())
            """
        )
    )
    run_killed_mid_task([str(script)], model, server, tmp_path)
    # `firm resume` rebuilds the team from the database: no script, no model settings.
    proc = firm_cli("resume", "--db", "state.db", "--json", cwd=tmp_path, env=bare_env())
    assert proc.returncode == 0, proc.stderr
    (summary,) = json.loads(proc.stdout)  # resume --json lists every run it continued
    assert (summary["status"], summary["result"]) == ("done", "The article.")
    assert_finished_once(tmp_path / "state.db", server)
    # The script run again, in a new process, finds the team done: its output, no model call.
    asked = len(server.requests)
    again = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120, env=bare_env(**server.env()))  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "The article."
    assert len(server.requests) == asked
