"""A small company whose CEO may ask a person (ask_human) and whose engineer may not, worked by
the llm brain against a scripted model on loopback; the store is a real SQLite file or a real
PostgreSQL database."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from firm.api import Firm
from firm.testing import ModelServer, ScriptedModel

ORG = """\
company: Ask Co
agents:
  - {id: ceo, name: Ada, title: CEO, ask_human: true}
  - {id: eng, name: Eli, title: Engineer, reports_to: ceo}
"""


def write_org(folder: Path, org: str = ORG) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "company.yaml"
    path.write_text(textwrap.dedent(org), encoding="utf-8")
    return path


@pytest.fixture
def db(store_url: str) -> str:
    """A new store on each backend in turn (tests/support/stores.py)."""
    return store_url


@pytest.fixture
def org_path(tmp_path: Path) -> Path:
    return write_org(tmp_path / "co")


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
def submit(firm: Firm, server: ModelServer, org_path: Path) -> Submit:
    def go(goal: str = "Launch the product") -> str:
        root = firm.submit(
            org_path,
            goal,
            brain="llm",
            # A call a test holds (test_notes holds eng's while it leaves a note) must not time
            # out and be retried: seconds can pass on a loaded machine, and no test here waits
            # for a timeout.
            brain_options=server.brain_options(backoff=0.01, backoff_max=0.02, timeout=60.0),
            workspace=org_path.parent / "ws",
        )
        return root.id

    return go
