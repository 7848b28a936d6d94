"""Stores for tests: a real SQLite file, and a real PostgreSQL server on loopback.

A test that takes `store` (or `store_url`, `open_any`) runs once per backend. The PostgreSQL
cluster is started once per test session, only if a test needs it; each test gets a fresh
database copied from a migrated template. A local run without PostgreSQL may skip those tests
with `pytest --no-postgres` or FIRM_TEST_NO_POSTGRES=1 — said in the summary, never silent;
scripts/test and CI never pass either.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from firm.store import SqlStore, open_store
from tests.postgres.pgcluster import PgServer, PostgresUnavailable

NO_POSTGRES_ENV = "FIRM_TEST_NO_POSTGRES"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--no-postgres",
        action="store_true",
        default=False,
        help=f"skip the tests that need PostgreSQL (or set {NO_POSTGRES_ENV}=1); local runs only",
    )


def postgres_skipped(config: pytest.Config) -> bool:
    return bool(config.getoption("--no-postgres")) or os.environ.get(NO_POSTGRES_ENV) == "1"


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    if postgres_skipped(config):
        terminalreporter.write_sep(
            "!", "PostgreSQL tests were SKIPPED (--no-postgres): this run checked SQLite only"
        )


@pytest.fixture(scope="session")
def pg_server(pytestconfig: pytest.Config) -> Iterator[PgServer]:
    """A throwaway PostgreSQL cluster on loopback, started once, only if a test needs it."""
    if postgres_skipped(pytestconfig):
        pytest.skip("PostgreSQL tests skipped: --no-postgres")
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
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new store on each backend in turn: an SQLite path, then a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "state" / "firm.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def open_any(store_url: str) -> Iterator[Callable[[], SqlStore]]:
    """Open more stores on the same database (as another process or machine would)."""
    opened: list[SqlStore] = []

    def make() -> SqlStore:
        s = open_store(store_url)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()


@pytest.fixture
def store(open_any: Callable[[], SqlStore]) -> SqlStore:
    """One store fixture over both backends: a test that takes it runs on each."""
    return open_any()
