"""The `firm` command as a user runs it: real subprocesses, real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import THREE_LEVELS
from tests.support import firm_cli


@pytest.fixture
def company(tmp_path: Path) -> Path:
    (tmp_path / "company.yaml").write_text(THREE_LEVELS)
    return tmp_path


def test_run_json_reports_the_root_and_exit_0(company: Path) -> None:
    proc = firm_cli("run", "company.yaml", "Launch an AI note-taking app", "--json", cwd=company)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) >= {"id", "status", "result", "files", "counts"}
    assert out["status"] == "done" and out["counts"] == {"done": 7}
    assert out["id"].startswith("T-") and len(out["id"]) == 18  # T- and 64 bits
    assert len(out["files"]) == 7
    for f in out["files"]:  # defaults: ./.firm for state, ./workspace for files
        assert (company / "workspace" / f).is_file()
    assert (company / ".firm" / "firm.db").is_file()


def test_run_exits_1_when_the_goal_fails_and_says_why(company: Path) -> None:
    proc = firm_cli("run", "company.yaml", "Launch", "--sim-fail", "ceo", "--json", cwd=company)
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["status"] == "failed" and "simulated failure" in out["error"]


def test_plain_run_shows_progress_report_and_files(company: Path) -> None:
    proc = firm_cli("run", "company.yaml", "Launch", "--db", "x.db", cwd=company)
    assert proc.returncode == 0, proc.stderr
    assert "delegated" in proc.stdout and "→ gabriel" in proc.stdout
    assert "merged 2 deliverable(s)" in proc.stdout
    # An engineer's deliverable, in the folder of the team it works in (its manager's).
    assert "Files (in" in proc.stdout and "cto/gabriel-T-" in proc.stdout


def test_tasks_show_and_cancel(company: Path) -> None:
    run = json.loads(firm_cli("run", "company.yaml", "Launch", "--json", cwd=company).stdout)
    listed = json.loads(firm_cli("tasks", "--json", cwd=company).stdout)
    assert len(listed) == 7
    assert {"id", "title", "status", "assignee", "parent_id"} <= set(listed[0])
    assert sum(1 for t in listed if t["parent_id"] is None) == 1

    tree = firm_cli("tasks", "--tree", cwd=company)
    assert tree.returncode == 0 and "✔ Launch" in tree.stdout and "└──" in tree.stdout

    shown = firm_cli("show", run["id"], cwd=company)
    assert shown.returncode == 0 and "Result" in shown.stdout and "Subtasks" in shown.stdout
    shown_json = json.loads(firm_cli("show", run["id"], "--json", cwd=company).stdout)
    assert len(shown_json["subtasks"]) == 2 and len(shown_json["tree_files"]) == 7

    nothing = firm_cli("cancel", run["id"], cwd=company)
    assert nothing.returncode == 0 and "nothing open" in nothing.stdout

    missing = firm_cli("show", "T-00000000", cwd=company)
    assert missing.returncode == 2 and "no task with id 'T-00000000'" in missing.stderr
    bad = firm_cli("tasks", "--status", "finished", cwd=company)
    assert bad.returncode == 2 and "not a status" in bad.stderr


def test_init_writes_an_example_that_runs(tmp_path: Path) -> None:
    made = firm_cli("init", "acme", cwd=tmp_path)
    assert made.returncode == 0 and (tmp_path / "acme" / "company.yaml").is_file()
    again = firm_cli("init", "acme", cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr
    run = firm_cli(
        "run", "acme/company.yaml", "Launch an AI note-taking app", "--json", cwd=tmp_path
    )
    assert run.returncode == 0 and json.loads(run.stdout)["status"] == "done"


def test_demo_runs_without_a_key(tmp_path: Path) -> None:
    proc = firm_cli(
        "demo", "--sim-latency", "0", "--json", cwd=tmp_path, env={"OPENAI_API_KEY": ""}
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "done"


@pytest.mark.parametrize("command", ["demo", "init", "run", "resume", "tasks", "show", "cancel"])
def test_every_command_has_help(command: str, tmp_path: Path) -> None:
    proc = firm_cli(command, "--help", cwd=tmp_path)
    assert proc.returncode == 0 and "Usage: firm " + command in proc.stdout


def test_bad_options_are_usage_errors(company: Path) -> None:
    proc = firm_cli("run", "company.yaml", "x", "--max-concurrent", "0", cwd=company)
    assert proc.returncode == 2 and "--max-concurrent" in proc.stderr
    proc = firm_cli("run", "company.yaml", "x", "--to", "nobody", cwd=company)
    assert proc.returncode == 2 and "'nobody' names no agent" in proc.stderr
    proc = firm_cli("run", "company.yaml", "x", "--brain", "oracle", cwd=company)
    assert proc.returncode == 2 and "unknown brain 'oracle'" in proc.stderr
    proc = firm_cli("run", "company.yaml", "x", "--priority", "asap", cwd=company)
    assert proc.returncode == 2 and "unknown priority 'asap'" in proc.stderr
    proc = firm_cli("run", "company.yaml", "   ", cwd=company)
    assert proc.returncode == 2 and "the goal is empty" in proc.stderr


def test_submit_and_serve_take_the_options_run_takes(company: Path) -> None:
    from firm.store import open_store

    proc = firm_cli(
        "submit",
        "company.yaml",
        "Launch",
        "--db",
        "s.db",
        "--grant",
        "files.read",
        "--limit",
        "max_rows=5",
        "--json",
        cwd=company,
    )
    assert proc.returncode == 0, proc.stderr
    root_id = json.loads(proc.stdout)["id"]
    llm = firm_cli(
        "submit",
        "company.yaml",
        "Launch",
        "--db",
        "s.db",
        "--brain",
        "llm",
        "--model",
        "m-1",
        "--json",
        cwd=company,
        env={"OPENAI_API_KEY": "test-key"},
    )
    assert llm.returncode == 0, llm.stderr
    store = open_store(company / "s.db")
    try:
        root = store.get_task(root_id)
        assert root.grant is not None and root.grant["scopes"] == ["files.read"]
        assert root.grant["limits"] == {"max_rows": 5.0}
        run = store.run(json.loads(llm.stdout)["id"])
        assert run.brain == "llm" and run.brain_options["model"] == "m-1"
        assert "test-key" not in json.dumps(run.brain_options)
    finally:
        store.close()
    mixed = firm_cli(
        "submit",
        "company.yaml",
        "x",
        "--db",
        "s.db",
        "--sim-latency",
        "1",
        "--brain",
        "llm",
        "--model",
        "m",
        cwd=company,
    )
    assert mixed.returncode == 2 and "apply to --brain simulation" in mixed.stderr
    helped = firm_cli("serve", "--help", cwd=company).stdout
    for option in ("--model", "--grant", "--limit", "--ttl", "--budget", "--sim-latency"):
        assert option in helped


def test_version(tmp_path: Path) -> None:
    import firm

    proc = firm_cli("--version", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == f"firm {firm.__version__}"
