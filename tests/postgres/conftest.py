"""Fixtures for running the store against both backends (pg_server and pg_url come from the
root conftest, which also gives every test that takes `store` both backends).

`any_store` is one store fixture parametrized over SQLite and PostgreSQL: a test that takes it
runs twice. The PostgreSQL server is started once per test session (see pgcluster.py); each test
gets a fresh database copied from a migrated template.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from firm.store import SqlStore, open_store


@pytest.fixture
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for a new store on the backend of the current parameter."""
    if request.param == "sqlite":
        return str(tmp_path / "state" / "firm.db")
    return request.getfixturevalue("pg_url")


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
def any_store(open_any: Callable[[], SqlStore]) -> SqlStore:
    return open_any()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_url" in metafunc.fixturenames:
        metafunc.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)
