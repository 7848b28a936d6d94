"""An audited company: a real run with delegations, allowed and denied calls, exported."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from firm.api import Firm
from firm.audit.keys import AuditKey
from firm.chain import digest, header_hash
from firm.tasks import Task
from tests.authority.scripted import ScriptedBrain, delegate, open_firm, run_company, write_company

AUDIT_CO = """\
company: Audit Co
tool_modules: [crm_tools.py]
agents:
  - {id: ceo, name: Ava, title: CEO, tools: ["crm.*", "files.*"], limits: {max_rows: 100}}
  - {id: lead, name: Lee, title: Team Lead, reports_to: ceo, tools: ["crm.query", "files.*"]}
  - {id: rev, name: Rex, title: Reviewer, reports_to: lead, tools: ["crm.query", "crm.export"]}
"""


def audit_scripts() -> dict[str, Any]:
    return {
        "ceo": [("crm.query", {"segment": "all", "rows": 50}), delegate("lead", "Check Q3")],
        "lead": [delegate("rev", "Review Q3", limits={"max_rows": 10})],
        "rev": [
            ("crm.query", {"segment": "q3", "rows": 5}),
            ("crm.export", {"destination": "elsewhere"}),
        ],
    }


@dataclass
class Audited:
    firm: Firm
    root: Task
    key: AuditKey
    bundle: dict[str, Any]
    folder: Path

    def task(self, assignee: str) -> Task:
        (t,) = [t for t in self.firm.tasks() if t.assignee == assignee]
        return t


@pytest.fixture
def audited(tmp_path: Path) -> Iterator[Audited]:
    company = write_company(tmp_path / "co", AUDIT_CO)
    with open_firm(tmp_path, ScriptedBrain(audit_scripts())) as firm:
        root = run_company(firm, company)
        assert root.status == "done"
        yield Audited(firm, root, firm.audit_key(), firm.export_audit(root.id), tmp_path)


def rehash(bundle: dict[str, Any], key: AuditKey | None = None) -> dict[str, Any]:
    """Recompute every hash and link, as someone rewriting the log would; re-sign if given
    the key (an insider), else leave the old signature."""
    out = copy.deepcopy(bundle)
    prev = out["entries"][0]["prev"]
    hashes: dict[int, str] = {}
    for e in out["entries"]:
        e["prev"] = prev
        if key is not None and e["kind"] == "checkpoint" and e["data"]["seq"] in hashes:
            signed = e["data"]["seq"]
            e["data"]["hash"] = hashes[signed]
            e["data"]["signature"] = key.sign_head(signed, hashes[signed])
        data_digest = digest(e["data"]) if "data" in e else e["data_digest"]
        e["hash"] = header_hash(
            prev, e["seq"], e["ts"], e["kind"], e["task_id"], e["agent"], data_digest
        )
        prev = hashes[e["seq"]] = e["hash"]
    last = out["entries"][-1]
    out["head"]["seq"], out["head"]["hash"] = last["seq"], last["hash"]
    if key is not None:
        out["head"]["signature"] = key.sign_head(last["seq"], last["hash"])
    return out


def entry(bundle: dict[str, Any], kind: str, agent: str, tool: str | None = None) -> dict:
    for e in bundle["entries"]:
        same_tool = tool is None or e.get("data", {}).get("tool") == tool
        if e["kind"] == kind and e["agent"] == agent and same_tool:
            return e
    raise LookupError((kind, agent, tool))
