"""Notes and answers over the API: a token is needed to write, and the log records the name the
token stands for; bad input is a 4xx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from firm.server import AccessPolicy, Office, OfficeServer
from firm.server.access import parse_people
from firm.tasks import Status
from firm.testing import ModelServer, ScriptedModel
from tests.humans.conftest import write_org
from tests.humans.test_questions import script_question

OFFICE_TOKEN = "office-secret"
ALICE = {"Authorization": "Bearer tok-alice"}


@pytest.fixture
def office(
    tmp_path: Path, model: ScriptedModel, server: ModelServer
) -> Iterator[tuple[Office, str]]:
    office = Office(
        write_org(tmp_path / "co"),
        db=tmp_path / "firm.db",
        brain="llm",
        brain_options=server.brain_options(timeout=5.0),
        workspace=tmp_path / "ws",
        policy=AccessPolicy(
            token=OFFICE_TOKEN,
            reads_need_token=False,
            people=parse_people("alice:tok-alice, bob:tok-bob"),
        ),
        heartbeat=0.1,
    )
    running = OfficeServer(office, "127.0.0.1", 0).start()
    yield office, running.url
    running.stop()


def test_questions_and_notes_through_the_api(
    office: tuple[Office, str], model: ScriptedModel, server: ModelServer
) -> None:
    off, url = office
    script_question(model)
    with httpx.Client(base_url=url, timeout=30) as c:
        root = c.post("/api/tasks", json={"goal": "Launch"}, headers=ALICE).json()["id"]
        assert off.firm.run_until(root, timeout=30).status == Status.WAITING

        # Notes: written with a token, read without one on loopback.
        assert c.post(f"/api/tasks/{root}/notes", json={"text": "hi"}).status_code == 401
        wrong = c.post(
            f"/api/tasks/{root}/notes", json={"text": "hi"}, headers={"Authorization": "Bearer x"}
        )
        assert wrong.status_code == 401
        missing = c.post("/api/tasks/T-00000000/notes", json={"text": "hi"}, headers=ALICE)
        assert missing.status_code == 404
        assert c.get("/api/tasks/T-00000000/notes").status_code == 404
        for bad in ({}, {"text": ""}, {"text": "x" * 4001}, {"text": "hi", "more": 1}):
            r = c.post(f"/api/tasks/{root}/notes", json=bad, headers=ALICE)
            assert r.status_code == 422, (bad, r.status_code)
        blank = c.post(f"/api/tasks/{root}/notes", json={"text": " \x00 "}, headers=ALICE)
        assert blank.status_code == 400 and "empty" in blank.json()["detail"]
        left = c.post(f"/api/tasks/{root}/notes", json={"text": "Think small."}, headers=ALICE)
        assert left.status_code == 201, left.text
        assert (left.json()["by"], left.json()["text"]) == ("alice", "Think small.")
        listed = c.get(f"/api/tasks/{root}/notes").json()
        assert [(n["by"], n["text"]) for n in listed] == [("alice", "Think small.")]

        # Questions: listed, answered once.
        (q,) = c.get("/api/questions").json()
        assert (q["question"], q["status"], q["task_id"]) == ("Which city first?", "pending", root)
        assert c.get("/api/approvals").json() == []
        qid = q["id"]
        assert c.post(f"/api/questions/{qid}/answer", json={"answer": "Oslo"}).status_code == 401
        nope = c.post("/api/questions/Q-00000000/answer", json={"answer": "x"}, headers=ALICE)
        assert nope.status_code == 404
        # An approval's id is not a question's, nor the other way round.
        as_approval = c.post(f"/api/approvals/{qid}/approve", headers=ALICE)
        assert as_approval.status_code == 404
        assert c.post(f"/api/questions/{qid}/answer", json={}, headers=ALICE).status_code == 422
        ok = c.post(f"/api/questions/{qid}/answer", json={"answer": "Oslo"}, headers=ALICE)
        assert ok.status_code == 200, ok.text
        assert (ok.json()["status"], ok.json()["answered_by"]) == ("answered", "alice")
        twice = c.post(
            f"/api/questions/{qid}/answer",
            json={"answer": "Bergen"},
            headers={"Authorization": "Bearer tok-bob"},
        )
        assert twice.status_code == 409 and "first answer stands" in twice.json()["detail"]
        assert c.get("/api/questions").json() == []
        (answered,) = c.get("/api/questions", params={"status": "all"}).json()
        assert answered["answer"] == "Oslo"

    done = off.firm.run_until(root, timeout=30)
    assert done.status == Status.DONE and done.result == "launching: Oslo"
    wake = server.requests_for("ceo")[-1].request.brief
    assert "alice answered: Oslo" in wake and "- from alice: Think small." in wake
