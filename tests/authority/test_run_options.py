"""`firm run --grant/--limit/--ttl/--budget` narrows the root task's authority."""

from __future__ import annotations

import json
import time
from pathlib import Path

from firm.api import Firm
from tests.authority.scripted import write_company
from tests.conftest import firm_cli

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
