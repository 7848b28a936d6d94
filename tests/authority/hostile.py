"""A company whose one agent calls probe tools with whatever arguments a test hands it, and
what to compare afterwards: the bodies that ran, the log entries written, the bundle's count."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from firm.api import Firm
from firm.audit.verify import Report, verify_bundle
from firm.endcall import with_calls
from firm.store.base import Event
from firm.tasks import Task
from tests.authority.scripted import Company, ScriptedBrain, open_firm, run_company

PROBE_TOOLS = '''
import firm

LEDGER = {ledger!r}


def _ran(name):
    with open(LEDGER, "a", encoding="utf-8") as f:
        f.write(name + "\\n")


@firm.tool("probe.echo")
def probe_echo(value, note: str = "") -> str:
    """Echo a value of any JSON type (the argument is unannotated)."""
    _ran("probe.echo")
    return "echoed"


@firm.tool("probe.table")
def probe_table(data: dict) -> str:
    """Take an object."""
    _ran("probe.table")
    return "taken"


@firm.tool("probe.rows", limits={{"rows": "max_rows"}})
def probe_rows(rows) -> str:
    """Fetch some rows (an unannotated argument bounded by a ceiling)."""
    _ran("probe.rows")
    return "fetched"


@firm.tool("probe.garble")
def probe_garble() -> str:
    """Answer with text no log can hold as it is."""
    _ran("probe.garble")
    return "half \\ud800 a surrogate"
'''

ORG = """\
company: Probe Co
tool_modules: [probe_tools.py]
agents:
  - {id: solo, name: So, title: Analyst, tools: ["probe.*"], limits: {max_rows: 100}}
"""

CALL_KINDS = ("tool_call", "tool_denied", "tool_error")


def write_probe_company(folder: Path) -> Company:
    folder.mkdir(parents=True, exist_ok=True)
    ledger = folder / "ran.txt"
    (folder / "probe_tools.py").write_text(PROBE_TOOLS.format(ledger=str(ledger)), "utf-8")
    org_path = folder / "company.yaml"
    org_path.write_text(textwrap.dedent(ORG), encoding="utf-8")
    return Company(folder, org_path, ledger)


@dataclass
class Outcome:
    root: Task
    brain: ScriptedBrain
    events: list[Event]
    report: Report
    ran: list[str]

    def entries(self, *kinds: str) -> list[Event]:
        # An ending's call is read as its own entry, as the verifier reads it (firm/endcall.py).
        return [e for e in with_calls(self.events) if e.kind in kinds and e.agent == "solo"]

    def allowed(self, tool: str | None = None) -> list[Event]:
        return [
            e
            for e in self.entries("tool_call")
            if e.data.get("allowed") is True and (tool is None or e.data.get("tool") == tool)
        ]

    @property
    def verified_allowed(self) -> int:
        """The number of allowed calls the offline verifier counted in the exported bundle."""
        found = re.search(r"(\d+) allowed call", self.report.check("containment").detail)
        assert found is not None, self.report.check("containment").detail
        return int(found.group(1))


def run_probe(tmp_path: Path, script: Any) -> Outcome:
    company = write_probe_company(tmp_path / "co")
    brain = ScriptedBrain({"solo": script})
    firm: Firm
    with open_firm(tmp_path, brain) as firm:
        root = run_company(firm, company)
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
        events = firm.events(limit=100_000)
    return Outcome(root, brain, events, report, company.ran())
