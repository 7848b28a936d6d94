"""Fixtures: real offices on loopback (see office_kit), and headless Chromium (browser_kit):
Debian's package, installed by this set-up when it is missing; Playwright drives it through
executable_path and never downloads a browser of its own."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_kit import CHROMIUM, CHROMIUM_ARGS, PLAN_ARGS, ensure_chromium
from office_kit import Running, start_office


@pytest.fixture(scope="module")
def office(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A quick office (no simulated latency), shared by a module's tests."""
    running = start_office(tmp_path_factory.mktemp("office"))
    yield running
    running.server.stop()


@pytest.fixture(scope="module")
def slow_office(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """An office whose agents take half a second a turn: time to watch and to cancel."""
    running = start_office(tmp_path_factory.mktemp("slow-office"), latency=0.5)
    yield running
    running.server.stop()


@pytest.fixture
def fresh_office(tmp_path: Path) -> Iterator[Callable[..., Running]]:
    """Start an office with options of the test's choosing (stopped afterwards)."""
    started: list[Running] = []

    def make(**options: Any) -> Running:
        running = start_office(tmp_path / f"office-{len(started)}", **options)
        started.append(running)
        return running

    yield make
    for running in started:
        running.server.stop()
        shutil.rmtree(running.folder, ignore_errors=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium for a module's page tests, without WebGL: the office shows its plan."""
    sync_api = pytest.importorskip("playwright.sync_api")
    # An expectation's wait only guards against a hang: on a loaded machine (several test
    # workers and browsers on two cores) a page can take longer than Playwright's 5 s.
    sync_api.expect.set_options(timeout=60_000)
    reason = ensure_chromium()
    if reason:
        pytest.skip(reason)
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS + PLAN_ARGS)
        yield b
        b.close()
