"""The LLM brain against a real chat-completions server on loopback (firm.testing)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from firm.api import Firm
from firm.org import OrgChart
from firm.tasks import Task
from firm.testing import ModelServer

# Retries and timeouts short enough that the failure tests take a fraction of a second.
FAST = {"backoff": 0.01, "backoff_max": 0.02, "timeout": 5.0}


@pytest.fixture(autouse=True)
def _clean_env(clean_model_env: None) -> None:
    """No developer's model settings in these tests."""


Runner = Callable[..., Task]


@pytest.fixture
def run_llm(firm: Firm, server: ModelServer, tmp_path: Path) -> Runner:
    """Work a goal to the end with the llm brain calling the scripted server."""

    def run(
        org: OrgChart,
        goal: str = "Launch an AI note-taking app",
        *,
        to: str | None = None,
        grant: dict[str, Any] | None = None,
        wait: float = 60,
        **options: Any,
    ) -> Task:
        root = firm.submit(
            org,
            goal,
            to=to,
            brain="llm",
            brain_options=server.brain_options(**{**FAST, **options}),
            workspace=tmp_path / "ws",
            grant=grant,
        )
        return firm.run_until(root.id, timeout=wait)

    return run
