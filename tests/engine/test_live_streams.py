"""What agents write streams live, word by word, before the paragraph reaches the log; the log
keeps its paragraphs. Both brains, in real runs: the simulation brain over its latency, and the
llm brain from a scripted model answering slowly over a real chat-completions stream."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from firm import Firm, load_org, streams
from firm.events import EventKind
from firm.testing import ModelServer, ScriptedModel, calls, complete, slow

CHART = """\
company: Streams Co
agents:
  - {id: ceo, name: Ava Stone, title: Chief Executive Officer}
  - {id: dev, name: Dan Reed, title: Engineer, reports_to: ceo}
"""

Heard = list[tuple[float, str, str, str]]


def listen(firm: Firm) -> tuple[Heard, threading.Lock, object]:
    heard: Heard = []
    lock = threading.Lock()

    def hear(agent: str, task_id: str, text: str) -> None:
        with lock:
            heard.append((time.time(), agent, task_id, text))

    return heard, lock, streams.listen(firm.store, hear)


def thoughts(firm: Firm, task_id: str) -> list[tuple[float, str]]:
    events = firm.store.events_after(0, 10_000, task_ids=[task_id])
    return [(e.ts, e.data["text"]) for e in events if e.kind == EventKind.THOUGHT]


def test_the_simulation_brain_streams_its_thought_before_logging_it(tmp_path: Path) -> None:
    (tmp_path / "company.yaml").write_text(CHART, encoding="utf-8")
    with Firm(tmp_path / "firm.db") as firm:
        heard, _, stop = listen(firm)
        root = firm.run(
            load_org(tmp_path / "company.yaml"),
            "Launch an AI note-taking app",
            brain_options={"latency": 0.4},
            workspace=tmp_path / "ws",
            timeout=60,
        )
        stop()  # type: ignore[operator]
        assert root.status == "done"
        [(logged_at, thought)] = thoughts(firm, root.id)

    first_turn = [(t, text) for t, agent, task, text in heard if task == root.id and text]
    before = [text for t, text in first_turn if t <= logged_at]
    # Several growing prefixes of the paragraph, the whole of it last, all before it was logged.
    assert len(set(before)) >= 3
    assert all(thought.startswith(text) for text in before)
    assert before[-1] == thought
    assert "'Launch an AI note-taking app'" in before[0]  # even the first words say what about
    # The engineer's line about its work streamed too, and was cleared: it goes to no log.
    dev = [text for _, agent, _, text in heard if agent == "dev"]
    assert any(dev) and dev[-1] == ""


def test_without_latency_the_simulation_brain_streams_nothing(tmp_path: Path) -> None:
    (tmp_path / "company.yaml").write_text(CHART, encoding="utf-8")
    with Firm(tmp_path / "firm.db") as firm:
        heard, _, stop = listen(firm)
        firm.run(load_org(tmp_path / "company.yaml"), "Ship it", workspace=tmp_path / "ws")
        stop()  # type: ignore[operator]
    assert heard == []


SAID = (
    "Let me think about how to approach this goal before I hand anything out to the team. "
    "The engineer should own the build, and I will review what comes back in the morning."
)


def test_the_llm_brain_streams_text_as_the_model_writes_it(tmp_path: Path) -> None:
    (tmp_path / "company.yaml").write_text(CHART, encoding="utf-8")
    model = ScriptedModel()
    model.when(agent="ceo", woken=False).reply(
        slow(calls(complete("Planned."), text=SAID), chunk_delay=0.02, chunk_size=6)
    )
    with ModelServer(model) as server, Firm(tmp_path / "firm.db") as firm:
        heard, _, stop = listen(firm)
        root = firm.run(
            load_org(tmp_path / "company.yaml"),
            "Plan the quarter",
            to="ceo",
            brain="llm",
            brain_options=server.brain_options(),
            workspace=tmp_path / "ws",
            timeout=60,
        )
        stop()  # type: ignore[operator]
        assert root.status == "done"
        [(logged_at, thought)] = thoughts(firm, root.id)

    assert thought == SAID  # the log keeps the paragraph whole
    streamed = [(t, text) for t, _, task, text in heard if task == root.id]
    texts = [text for _, text in streamed]
    # Token by token: many growing prefixes, each heard before the paragraph was logged.
    assert len(set(texts)) >= 20
    assert all(SAID.startswith(text) for text in texts)
    assert all(t <= logged_at for t, _ in streamed)
