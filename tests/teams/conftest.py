"""Teams against a real chat-completions server on loopback (firm.testing), answering as the
manager and the workers. The environment points the team at it, as a user's would."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from firm import Agent, Task, Team
from firm.store import open_store
from firm.store.base import Event
from firm.testing import ModelServer, Reply, ScriptedModel, text


@pytest.fixture(autouse=True)
def _clean_env(clean_model_env: None) -> None:
    """No developer's model settings in these tests."""


@pytest.fixture
def server(model: ScriptedModel, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    with ModelServer(model) as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-team-test")
        yield s


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "firm.db"


def pick(task_id: str, agent_name: str, action: str = "execute") -> Reply:
    """The manager's answer, as a model following the schema sends it."""
    return text(json.dumps({"task_id": task_id, "agent_name": agent_name, "action": action}))


STOP = pick("", "", "stop")


def two_task_team(db: Path, tmp_path: Path, **options: Any) -> Team:
    """Researcher and Writer, tasks research then write."""
    researcher = Agent(name="Researcher", role="Research topics", goal="Find what matters")
    writer = Agent(name="Writer", role="Write content")
    tasks = [
        Task(name="research", description="Research AI trends", agent=researcher),
        Task(
            name="write",
            description="Write an article on the research",
            expected_output="Three paragraphs",
            agent=writer,
        ),
    ]
    options.setdefault("process", "hierarchical")
    return Team(
        agents=[researcher, writer], tasks=tasks, db=db, workspace=tmp_path / "ws", **options
    )


def events(db: Path, kind: str | None = None) -> list[Event]:
    store = open_store(db)
    try:
        return [e for e in store.events_after(0, 1_000_000) if kind is None or e.kind == kind]
    finally:
        store.close()


def user_messages(server: ModelServer, agent: str) -> list[str]:
    """The user messages of each request made for an agent (brief, then any corrections)."""
    return [
        "\n".join(str(m.get("content")) for m in r.body["messages"] if m.get("role") == "user")
        for r in server.requests_for(agent)
    ]
