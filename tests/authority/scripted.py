"""Test helpers: a brain that calls the tools a script names, and a company with user tools.

The simulation brain only uses files.* and lifecycle tools; authority tests need agents that
call specific tools with specific arguments, so each agent here follows a script.
"""

from __future__ import annotations

import textwrap
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from firm.api import Firm
from firm.clock import SYSTEM_CLOCK, Clock
from firm.session import Session, ToolResult
from firm.tasks import Task

Step = tuple[str, dict[str, Any]]
Script = list[Step] | Callable[[Session], str | None]


@dataclass
class ScriptedBrain:
    """Runs each agent's script on its first turn; on a later turn (woken with its reports'
    results) it completes with a summary. Records every call's result, in order."""

    scripts: dict[str, Script]
    name: str = "scripted"
    calls: list[tuple[str, str, ToolResult]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def call(self, session: Session, tool: str, args: dict[str, Any] | None = None) -> ToolResult:
        result = session.call(tool, args or {})
        with self.lock:
            self.calls.append((session.agent_id, tool, result))
        return result

    def run(self, session: Session) -> str | None:
        if session.task.turn > 0:
            summary = "; ".join(f"{t.assignee}: {t.status}" for t in session.subtasks)
            self.call(session, "complete_task", {"result": f"merged: {summary}"})
            return None
        script = self.scripts.get(session.agent_id, [])
        if callable(script):
            said = script(session)
            if isinstance(said, str):
                return said  # ends the session with a message, as a model's last text does
        else:
            for tool, args in script:
                self.call(session, tool, args)
        if not session.ended and not session.delegated:
            self.call(session, "complete_task", {"result": f"{session.agent_id} is done"})
        return None

    def results(self, agent: str, tool: str) -> list[ToolResult]:
        with self.lock:
            return [r for a, t, r in self.calls if a == agent and t == tool]


CRM_TOOLS = '''
import asyncio
import firm

LEDGER = {ledger!r}


def _ran(name):
    with open(LEDGER, "a", encoding="utf-8") as f:
        f.write(name + "\\n")


@firm.tool("crm.query", limits={{"rows": "max_rows"}})
def crm_query(segment: str, rows: int = 10) -> str:
    """Query customers of a segment."""
    _ran("crm.query")
    return f"{{rows}} customers in {{segment}}"


@firm.tool("crm.export")
def crm_export(destination: str) -> str:
    """Export the customer list somewhere."""
    _ran("crm.export")
    return f"exported to {{destination}}"


@firm.tool("crm.score")
async def crm_score(customer: str, weights: list[float] | None = None) -> dict:
    """Score a customer (async)."""
    await asyncio.sleep(0)
    _ran("crm.score")
    return {{"customer": customer, "score": sum(weights or [1.0])}}
'''


@dataclass
class Company:
    folder: Path
    org_path: Path
    ledger: Path

    def ran(self) -> list[str]:
        """Which tool bodies executed, in order."""
        if not self.ledger.exists():
            return []
        return self.ledger.read_text(encoding="utf-8").split()


def write_company(folder: Path, org_text: str, module: str = "crm_tools.py") -> Company:
    """An org chart file plus a real tool module beside it that logs each body it runs."""
    folder.mkdir(parents=True, exist_ok=True)
    ledger = folder / "ran.txt"
    (folder / module).write_text(CRM_TOOLS.format(ledger=str(ledger)), encoding="utf-8")
    org_path = folder / "company.yaml"
    org_path.write_text(textwrap.dedent(org_text), encoding="utf-8")
    return Company(folder, org_path, ledger)


def run_company(
    firm: Firm, company: Company, goal: str = "Review the Q3 summary", **submit: Any
) -> Task:
    root = firm.submit(company.org_path, goal, workspace=company.folder / "ws", **submit)
    firm.run_until(root.id, timeout=60)
    firm.run_until_idle(timeout=60)  # a revoked session may still be finishing its script
    return firm.task(root.id)


def open_firm(tmp_path: Path, brain: ScriptedBrain, clock: Clock = SYSTEM_CLOCK) -> Firm:
    return Firm(tmp_path / "state" / "firm.db", brain=brain, heartbeat=0.05, clock=clock)


def delegate(assignee: str, title: str = "Review it", **narrowing: Any) -> Step:
    return (
        "delegate_task",
        {"assignee": assignee, "title": title, "description": f"{title}.", **narrowing},
    )
