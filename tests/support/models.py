"""The scripted model behind a real chat-completions server on loopback (firm.testing), and a
firm to run it with. Import these fixtures into a directory's conftest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from firm.api import Firm
from firm.testing import ModelServer, ScriptedModel

MODEL_ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "FIRM_MODEL", "FIRM_DB")


@pytest.fixture
def clean_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own model settings must not leak into what the tests expect."""
    for name in MODEL_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def model() -> ScriptedModel:
    """A scripted model with no autopilot: a request no rule answers fails loudly (400)."""
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
