"""Shared fixtures: real SQLite files in a temporary folder, org charts built from text."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from firm.org import OrgChart, parse_org
from firm.store import SqlStore, open_store
from tests.postgres.pgcluster import PgServer, PostgresUnavailable

THREE_LEVELS = """\
company: Test Co
max_concurrent: 4
agents:
  - {id: ceo, name: Ava, title: Chief Executive Officer}
  - {id: cto, name: Ben, title: Chief Technology Officer, reports_to: ceo}
  - {id: cmo, name: Cleo, title: Chief Marketing Officer, reports_to: ceo}
  - {id: gabriel, name: Gabriel, title: Backend Engineer, reports_to: cto}
  - {id: hana, name: Hana, title: Frontend Engineer, reports_to: cto}
  - {id: maya, name: Maya, title: Content Marketer, reports_to: cmo}
  - {id: omar, name: Omar, title: Growth Marketer, reports_to: cmo}
"""


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A throwaway PostgreSQL cluster on loopback, started once, only if a test needs it."""
    try:
        server = PgServer()
    except PostgresUnavailable as exc:
        pytest.fail(f"cannot start PostgreSQL for the tests: {exc}")
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for one test."""
    url = pg_server.create_database()
    yield url
    pg_server.drop_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    """One store fixture over both backends: a test that takes it runs on each."""
    if request.param == "sqlite":
        s = open_store(tmp_path / "state" / "firm.db")
    else:
        s = open_store(request.getfixturevalue("pg_url"))
    yield s
    s.close()


@pytest.fixture
def org_factory(tmp_path: Path) -> Callable[[str], OrgChart]:
    def make(text: str, name: str = "company.yaml") -> OrgChart:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return parse_org(path.read_text(encoding="utf-8"), str(path))

    return make


@pytest.fixture
def three_levels(org_factory: Callable[[str], OrgChart]) -> OrgChart:
    return org_factory(THREE_LEVELS)


def firm_cli(
    *args: str,
    cwd: Path,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run the real `firm` command in a subprocess (as `python -m firm`)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("FIRM_DB", None) if env is None or "FIRM_DB" not in env else None
    proc = subprocess.run(
        [sys.executable, "-m", "firm", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"firm {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc
