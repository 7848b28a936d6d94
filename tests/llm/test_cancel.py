"""Cancelling a task stops its session while the model is still answering."""

from __future__ import annotations

from pathlib import Path

from firm.api import Firm
from firm.org import OrgChart
from firm.tasks import Status
from firm.testing import ModelServer, ScriptedModel, hang, slow, text
from tests.support import events_of

from .conftest import FAST


def _submit(firm: Firm, org: OrgChart, server: ModelServer, tmp_path: Path) -> str:
    root = firm.submit(
        org,
        "Write the launch essay",
        to="gabriel",
        brain="llm",
        brain_options=server.brain_options(**{**FAST, "timeout": 30.0}),
        workspace=tmp_path / "ws",
    )
    firm.engine.start()
    return root.id


def test_cancel_while_the_model_streams_a_long_answer(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, firm: Firm, tmp_path: Path
) -> None:
    essay = "".join(f"Paragraph {i} of a very long essay.\n\n" for i in range(200))
    model.when(agent="gabriel").reply(slow(text(essay), chunk_delay=0.02, chunk_size=8))
    root_id = _submit(firm, three_levels, server, tmp_path)
    assert server.wait_until(lambda reqs: reqs and reqs[0].chunks_sent >= 5)

    cancelled = firm.cancel(root_id, "the user changed their mind")

    assert cancelled == [root_id]
    firm.engine.run_until_idle(timeout=20)  # the session ended: no worker is held
    assert server.wait_until(lambda reqs: reqs[0].ended is not None)
    answer = server.requests[0]
    assert answer.disconnected and not answer.completed  # the stream was closed mid-answer
    assert len(server.requests) == 1  # and the session did not call the model again
    task = firm.task(root_id)
    assert task.status == Status.CANCELLED
    assert task.error == "the user changed their mind"
    # What the model had said before the cancel reached the activity log.
    thoughts = events_of(firm, "thought", root_id)
    assert thoughts and thoughts[0].data["text"].startswith("Paragraph 0")


def test_cancel_while_the_model_has_not_answered_yet(
    three_levels: OrgChart, model: ScriptedModel, server: ModelServer, firm: Firm, tmp_path: Path
) -> None:
    model.when(agent="gabriel").always(hang())
    root_id = _submit(firm, three_levels, server, tmp_path)
    assert server.wait_for_requests(1)

    firm.cancel(root_id)

    # The session let go at once, although the request is still hanging (timeout 30s): 20 s
    # is a hang bound for a loaded machine that still tells the two apart.
    firm.engine.run_until_idle(timeout=20)
    assert server.requests[0].ended is None
    assert firm.task(root_id).status == Status.CANCELLED
    assert len(server.requests) == 1


def test_a_stopping_worker_hands_the_task_back(
    three_levels: OrgChart, model: ScriptedModel, tmp_path: Path
) -> None:
    """Ctrl-C during a model call: the worker stops promptly and the task can be resumed."""
    model.when(agent="gabriel").always(hang())
    with ModelServer(model) as server:
        firm = Firm(tmp_path / "f.db", heartbeat=0.2)
        root_id = _submit(firm, three_levels, server, tmp_path)
        assert server.wait_for_requests(1)
        firm.close()  # returns although the model never answered
        with Firm(tmp_path / "f.db") as again:
            assert again.task(root_id).status == Status.TODO
