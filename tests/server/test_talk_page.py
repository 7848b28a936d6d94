"""People talking with the company from the office page (headless Chromium): an agent's
question puts a badge on its desk, shows in its task's drawer and is answered there (the
answer reaches the model as the question's result); a note left in the drawer is in the log
under the person's name and in the task's next brief; a stale token reads and is asked for the
token only to write."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser_kit import ARTIFACTS

from firm.server import AccessPolicy, Office, OfficeServer
from firm.testing import ModelRequest, ModelServer, ScriptedModel, call, calls, complete

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

TOKEN = "office-token-for-talk"
ALICE = "alice-token-0123"
SLOW = 60_000  # a guard against hangs on a loaded machine, not a timing claim

ORG = """\
company: Launch Co
agents:
  - {id: ceo, name: Ada, title: CEO, ask_human: true}
"""


@dataclass
class TalkOffice:
    server: OfficeServer
    briefs: list[str]

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        )

    def wait_for(self, path: str, test: Any) -> Any:
        deadline = time.monotonic() + 60
        while True:
            with self.client() as c:
                data = c.get(path).json()
            if test(data):
                return data
            assert time.monotonic() < deadline, data
            time.sleep(0.05)


def script(model: ScriptedModel, briefs: list[str]) -> None:
    def ask(req: ModelRequest):  # type: ignore[no-untyped-def]
        return calls(call("ask_human", question="Which <b>city</b> first?"))

    def done(req: ModelRequest):  # type: ignore[no-untyped-def]
        briefs.append(req.brief)
        return calls(complete("launching"))

    model.when(agent="ceo", match=lambda r: "answered" not in r.brief).reply(ask)
    model.when(agent="ceo", brief_contains="answered").always(done)


@pytest.fixture
def talk(tmp_path: Path) -> Iterator[TalkOffice]:
    org = tmp_path / "company.yaml"
    org.write_text(textwrap.dedent(ORG), encoding="utf-8")
    model = ScriptedModel(autopilot=False)
    briefs: list[str] = []
    script(model, briefs)
    with ModelServer(model) as models:
        office = Office(
            org,
            db=tmp_path / "firm.db",
            brain="llm",
            brain_options=models.brain_options(timeout=5.0),
            workspace=tmp_path / "ws",
            policy=AccessPolicy(token=TOKEN, reads_need_token=False, people={ALICE: "alice"}),
            heartbeat=0.1,
        )
        server = OfficeServer(office, "127.0.0.1", 0).start()
        yield TalkOffice(server, briefs)
        server.stop()


def test_a_question_is_answered_and_a_note_left_from_the_drawer(
    browser: Any, talk: TalkOffice
) -> None:
    errors: list[str] = []
    page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(talk.server.url + "/#token=stale-token-from-yesterday")
    with talk.client() as c:
        root = c.post("/api/tasks", json={"goal": "Plan the launch"}).json()["id"]
    (question,) = talk.wait_for("/api/questions", lambda items: len(items) == 1)

    # The desk waits for a person's answer: a badge that says so and opens the task.
    badge = page.locator('.desk[data-agent="ceo"] .ask-badge')
    expect(badge).to_be_visible(timeout=SLOW)
    expect(badge.locator(".ask-words")).to_have_text("Answer?")
    expect(page.locator('.desk[data-agent="ceo"] .desk-state')).to_have_text(
        "Waiting for a person", timeout=SLOW
    )
    badge.click()
    drawer = page.locator("#drawer")
    card = drawer.locator(f'.talk-question[data-question="{question["id"]}"]')
    expect(card).to_contain_text("Ada asks:", timeout=SLOW)
    expect(card).to_contain_text("Which <b>city</b> first?")  # text, never markup
    assert drawer.locator(".talk b").count() == 0

    # The stale token reads; writing asks for the token, then goes through as alice.
    card.locator("textarea").fill("Lisbon")
    card.get_by_role("button", name="Answer").click()
    dialog = page.locator("#token-dialog")
    expect(dialog).to_be_visible(timeout=SLOW)
    page.locator("#token-input").fill(ALICE)
    dialog.get_by_role("button", name="Use token").click()
    expect(dialog).to_be_hidden(timeout=SLOW)
    answered = drawer.locator(".talk-question .decision-verdict")
    expect(answered).to_contain_text("Answered by alice", timeout=SLOW)
    talk.wait_for(f"/api/tasks/{root}", lambda t: t["status"] == "done")
    expect(badge).to_be_hidden(timeout=SLOW)
    assert any("Lisbon" in b for b in talk.briefs), talk.briefs

    # A note on the finished task: in the drawer, and in the log under alice's name.
    drawer.locator(".talk-form textarea").last.fill("Good call on Lisbon.")
    drawer.get_by_role("button", name="Leave note").click()
    expect(drawer.locator(".talk-note")).to_contain_text("Good call on Lisbon.", timeout=SLOW)
    expect(drawer.locator(".talk-note")).to_contain_text("alice")
    with talk.client() as c:
        notes = c.get(f"/api/tasks/{root}/notes").json()
    assert [(n["by"], n["text"]) for n in notes] == [("alice", "Good call on Lisbon.")]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "talk-drawer.png"))
    # The answer refused for the stale token (401) is the only error the browser logs.
    assert [e for e in errors if "401" not in e] == []
