"""The crewai brain against a real chat-completions server on loopback (firm.testing):
CrewAI's own OpenAI client speaks HTTP to the scripted model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("crewai", reason="the crewai extra is not installed")

from firm.api import Firm
from firm.org import OrgChart
from firm.tasks import Task
from firm.testing import ModelServer

FAST = {"backoff": 0.01, "backoff_max": 0.02, "timeout": 5.0, "max_retries": 0}


@pytest.fixture(autouse=True)
def _clean_env(clean_model_env: None) -> None:
    """No developer's model settings in these tests."""


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
