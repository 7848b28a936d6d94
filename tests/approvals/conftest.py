"""A company whose payments wait for a person, worked by the llm brain against a scripted
model on loopback; the store is a real SQLite file or a real PostgreSQL database."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from firm.api import Firm
from firm.testing import ModelServer, ScriptedModel

TOOLS = '''
import firm

LEDGER = {ledger!r}


@firm.tool("payments.transfer")
def transfer(to: str, amount: int) -> str:
    """Send money."""
    with open(LEDGER, "a", encoding="utf-8") as f:
        f.write(f"{{to}} {{amount}}\\n")
    return f"sent {{amount}} to {{to}}"


@firm.tool("payments.balance")
def balance() -> str:
    """The balance (needs no approval)."""
    return "balance: 1000"
'''

ORG = """\
company: Pay Co
tool_modules: [pay_tools.py]
approvals:
  - {{tools: ["payments.transfer"], timeout: {timeout}}}
agents:
  - {{id: cfo, name: Cam, title: CFO, tools: ["payments.*", "files.*"]}}
"""


@dataclass
class Company:
    folder: Path
    org_path: Path
    ledger: Path

    def transfers(self) -> list[str]:
        if not self.ledger.exists():
            return []
        return self.ledger.read_text(encoding="utf-8").splitlines()


def write_company(folder: Path, timeout: str = "2h", org: str = ORG) -> Company:
    folder.mkdir(parents=True, exist_ok=True)
    ledger = folder / "ledger.txt"
    (folder / "pay_tools.py").write_text(TOOLS.format(ledger=str(ledger)), encoding="utf-8")
    org_path = folder / "company.yaml"
    org_path.write_text(textwrap.dedent(org.format(timeout=timeout)), encoding="utf-8")
    return Company(folder, org_path, ledger)


@pytest.fixture
def db(store_url: str) -> str:
    """A new store on each backend in turn (tests/support/stores.py)."""
    return store_url


@pytest.fixture
def company(tmp_path: Path) -> Company:
    return write_company(tmp_path / "co")


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel(autopilot=False)


@pytest.fixture
def server(model: ScriptedModel) -> Iterator[ModelServer]:
    with ModelServer(model) as s:
        yield s


@pytest.fixture
def firm(db: str) -> Iterator[Firm]:
    f = Firm(db, heartbeat=0.1)
    yield f
    f.close()


Submit = Callable[..., str]


@pytest.fixture
def submit(firm: Firm, server: ModelServer, company: Company) -> Submit:
    def go(goal: str = "Pay Acme for the March invoice") -> str:
        root = firm.submit(
            company.org_path,
            goal,
            brain="llm",
            brain_options=server.brain_options(backoff=0.01, backoff_max=0.02, timeout=5.0),
            workspace=company.folder / "ws",
        )
        return root.id

    return go
