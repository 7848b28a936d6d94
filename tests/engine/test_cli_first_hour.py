"""What a new user hits in the first hour: read commands on the wrong store, short ids,
usage errors that name what is missing, a folder for a chart, piped output."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import firm_cli


def test_read_commands_never_create_a_store_and_say_which_they_looked_for(
    tmp_path: Path,
) -> None:
    out = firm_cli("tasks", cwd=tmp_path)
    assert out.returncode == 2
    assert f"no store at {tmp_path}/.firm/firm.db" in out.stderr
    assert not (tmp_path / ".firm").exists()
    out = firm_cli("tasks", "--db", str(tmp_path / "no" / "such" / "x.db"), cwd=tmp_path)
    assert out.returncode == 2 and "no store at" in out.stderr
    assert not (tmp_path / "no").exists()
    for args in (["show", "T-deadbeef"], ["cancel", "T-deadbeef"], ["revoke", "T-deadbeef"]):
        out = firm_cli(*args, cwd=tmp_path)
        assert out.returncode == 2 and "no store at" in out.stderr, args
    assert not (tmp_path / ".firm").exists()


def test_short_ids_unknown_roots_and_the_store_named(tmp_path: Path) -> None:
    firm_cli("init", "acme", cwd=tmp_path, check=True)
    run = json.loads(
        firm_cli("run", "acme", "Launch", "--json", cwd=tmp_path, check=True).stdout
    )  # a folder stands for its company.yaml
    root = run["id"]
    shown = firm_cli("show", root[:6], cwd=tmp_path)
    assert shown.returncode == 0 and root in shown.stdout
    listed = json.loads(firm_cli("tasks", "--root", root[:6], "--json", cwd=tmp_path).stdout)
    assert len(listed) == 7 and {t["root_id"] for t in listed} == {root}
    unknown = firm_cli("tasks", "--root", "T-deadbeef", cwd=tmp_path)
    assert unknown.returncode == 2
    assert "no task with id 'T-deadbeef' in sqlite:///" in unknown.stderr
    ambiguous = firm_cli("show", "T-", cwd=tmp_path)
    assert ambiguous.returncode == 2
    none = firm_cli("tasks", "--status", "waiting", cwd=tmp_path)
    assert none.returncode == 0 and "No tasks in sqlite:///" in none.stdout


def test_usage_errors_name_the_missing_chart_or_goal(tmp_path: Path) -> None:
    out = firm_cli("run", "Launch an AI note-taking app", cwd=tmp_path)
    assert out.returncode == 2
    assert "the chart is missing" in out.stderr
    assert 'firm run acme/company.yaml "Launch an AI note-taking app"' in out.stderr
    firm_cli("init", "acme", cwd=tmp_path, check=True)
    out = firm_cli("run", "acme/company.yaml", cwd=tmp_path)
    assert out.returncode == 2 and "the goal is missing" in out.stderr
    (tmp_path / "empty").mkdir()
    out = firm_cli("submit", "empty", "Go", cwd=tmp_path)
    assert out.returncode == 2 and "empty is a folder" in out.stderr
    usage = firm_cli("run", "--help", cwd=tmp_path).stdout
    assert "ORG" in usage and "GOAL" in usage


def test_piped_output_keeps_each_line_whole(tmp_path: Path) -> None:
    firm_cli("init", "acme", cwd=tmp_path, check=True)
    long_dir = tmp_path / ("a-rather-long-folder-name-" * 4)
    out = firm_cli("run", "acme/company.yaml", "Go", "--db", str(long_dir / "f.db"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert first.endswith("f.db") and len(first) > 80
    # The report's panel starts on a line of its own, never after an event line.
    assert all(
        line.startswith(("╭", " ", "│", "╰", "Files", "Tasks", "Acme", "2", "1", "0"))
        for line in out.stdout.splitlines()
    ), out.stdout


def test_the_report_keeps_what_was_not_delivered_on_a_line_of_its_own(tmp_path: Path) -> None:
    firm_cli("init", "acme", cwd=tmp_path, check=True)
    out = firm_cli("run", "acme", "Go", "--sim-fail", "cto", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = [line.strip("│ ") for line in out.stdout.splitlines()]
    assert "Not delivered (1):" in lines, out.stdout
    root = json.loads(firm_cli("tasks", "--json", cwd=tmp_path).stdout)[0]
    listed = out.stdout.split("Files (in", 1)[1].splitlines()[1:-1]
    assert [f.strip() for f in listed] == root["files"]
