"""The crewai brain against a real chat-completions server on loopback (firm.testing):
CrewAI's own OpenAI client speaks HTTP to the scripted model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("crewai", reason="the crewai extra is not installed")

from firm.api import Firm
from firm.org import OrgChart
from firm.store.base import Event
from firm.tasks import Task
from firm.testing import ModelServer, ScriptedModel

FAST = {"backoff": 0.01, "backoff_max": 0.02, "timeout": 5.0, "max_retries": 0}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "FIRM_MODEL", "FIRM_DB"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel(autopilot=False)


@pytest.fixture
def server(model: ScriptedModel) -> Iterator[ModelServer]:
    with ModelServer(model) as s:
        yield s


@pytest.fixture
def firm(tmp_path: Path) -> Iterator[Firm]:
    f = Firm(tmp_path / "state" / "firm.db", heartbeat=0.2)
    yield f
    f.close()


Runner = Callable[..., Task]


@pytest.fixture
def run_crewai(firm: Firm, server: ModelServer, tmp_path: Path) -> Runner:
    def run(
        org: OrgChart,
        goal: str = "Launch an AI note-taking app",
        *,
        to: str | None = None,
        brain: str = "crewai",
        grant: dict[str, Any] | None = None,
        wait: float = 120,
        **options: Any,
    ) -> Task:
        root = firm.submit(
            org,
            goal,
            to=to,
            brain=brain,
            brain_options=server.brain_options(**{**FAST, **options}),
            workspace=tmp_path / "ws",
            grant=grant,
        )
        return firm.run_until(root.id, timeout=wait)

    return run


def events_of(firm: Firm, kind: str, task_id: str | None = None) -> list[Event]:
    return [
        e
        for e in firm.events(limit=100_000)
        if e.kind == kind and (task_id is None or e.task_id == task_id)
    ]
