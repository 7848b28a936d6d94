"""`firm run --grant/--limit/--ttl/--budget` narrows the root task's authority."""

from __future__ import annotations

import json
import time
from pathlib import Path

from firm.api import Firm
from tests.authority.scripted import write_company
from tests.support import firm_cli

ORG = """\
company: Cli Co
tool_modules: [crm_tools.py]
agents:
  - {id: boss, name: Bo, title: Chief Executive Officer, tools: ["crm.*", "files.*"]}
  - {id: dev, name: Dee, title: Backend Engineer, reports_to: boss}
"""


def test_run_options_become_the_root_grant(tmp_path: Path) -> None:
    company = write_company(tmp_path, ORG)
    before = time.time()
    out = firm_cli(
        "run", str(company.org_path), "Ship it",
        "--grant", "files.*", "--grant", "crm.query",
        "--limit", "max_rows=100", "--limit", "max_spend=2.5",
        "--ttl", "3600", "--budget", "50000",
        "--db", "firm.db", "--json",
        cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)
    with Firm(tmp_path / "firm.db") as firm:
        grant = firm.task(run["id"]).grant
        dev = next(t for t in firm.subtree(run["id"]) if t.assignee == "dev")
    assert grant["scopes"] == ["crm.query", "files.*"]
    assert grant["limits"] == {"max_rows": 100.0, "max_spend": 2.5}
    assert before + 3600 <= grant["expires_at"] <= time.time() + 3600
    assert grant["budget_tokens"] == 50000
    # The simulation's engineer (default tools: files.*) still delivered under it.
    assert run["status"] == "done" and dev.grant["scopes"] == ["files.*"]
    assert dev.grant["budget_tokens"] == 25000  # an equal share: 50000 // (1 report + 1)


def test_bad_run_options_are_one_clear_line(tmp_path: Path) -> None:
    company = write_company(tmp_path, ORG)
    for args, message in [
        (["--limit", "max_rows"], "write it as NAME=NUMBER"),
        (["--limit", "max_rows=lots"], "'lots' is not a number"),
        (["--grant", "crm query"], "'crm query' is not a tool name or glob"),
        (["--ttl", "0"], "ttl must be more than 0 seconds"),
    ]:
        out = firm_cli("run", str(company.org_path), "x", *args, "--db", "f.db", cwd=tmp_path)
        assert out.returncode == 2, (args, out.stderr)
        said = " ".join(out.stderr.split())  # the terminal may wrap the line
        assert message in said and "Traceback" not in said


def test_a_grant_that_matches_nothing_the_top_agent_holds_is_said_before_the_run(
    tmp_path: Path,
) -> None:
    """The README's example on the chart `firm init` writes: the CEO holds files.* only."""
    firm_cli("init", "acme", cwd=tmp_path, check=True)
    out = firm_cli(
        "run", "acme/company.yaml", "Clean up the CRM",
        "--grant", "crm.query", "--limit", "max_rows=100", "--ttl", "3600",
        cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "--grant 'crm.query' matches no tool ceo holds" in out.stderr
    assert "this run may call no tools" in out.stderr
    # Nobody wrote a file the grant leaves out; every task still delivered, in text.
    assert not (tmp_path / "workspace").exists() or not any((tmp_path / "workspace").rglob("*.md"))
    assert "Tasks: 7 done" in out.stdout
    assert "denied" not in out.stdout


def test_a_grant_within_the_top_agents_tools_says_nothing(tmp_path: Path) -> None:
    firm_cli("init", "acme", cwd=tmp_path, check=True)
    out = firm_cli("run", "acme/company.yaml", "Ship it", "--grant", "files.*", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "warning" not in out.stderr
