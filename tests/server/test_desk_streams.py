"""A desk shows what its agent is writing as the model writes it, before the paragraph reaches
the log, in headless Chromium against a real office running the llm brain on a scripted model
that answers slowly over a real stream; the desk keeps its size and the page logs no errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_kit import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, WEBGL_ARGS
from office_kit import TOKEN, Running

from firm.server import AccessPolicy, Office, OfficeServer
from firm.testing import ModelServer, ScriptedModel, calls, complete, delegate, slow

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

CHART = """\
company: Streams Co
agents:
  - {id: ceo, name: Ava Stone, title: Chief Executive Officer}
  - {id: dev, name: Dan Reed, title: Engineer, reports_to: ceo}
"""
SAID = (
    "Before handing anything out I want the plan straight: the engineer owns the build, "
    "the review happens once it is back, and nothing ships without a test that fails first."
)

WATCH = """() => {
  window.__seen = [];
  setInterval(() => {
    const t = document.querySelector('.desk[data-agent="ceo"] .desk-thought');
    if (!t.classList.contains('empty'))
      window.__seen.push([Date.now() / 1000, t.classList.contains('streaming'), t.textContent]);
  }, 20);
}"""


@pytest.fixture
def streaming_office(tmp_path) -> Iterator[Running]:  # type: ignore[no-untyped-def]
    (tmp_path / "company.yaml").write_text(CHART, encoding="utf-8")
    model = ScriptedModel()
    model.when(agent="ceo", woken=False).reply(
        slow(calls(delegate("dev", "Build it"), text=SAID), chunk_delay=0.06, chunk_size=4)
    )
    model.when(agent="ceo", woken=True).reply(calls(complete("Shipped.")))
    with ModelServer(model) as server:
        office = Office(
            tmp_path / "company.yaml",
            db=tmp_path / "firm.db",
            brain="llm",
            brain_options=server.brain_options(),
            workspace=tmp_path / "workspace",
            policy=AccessPolicy(token=TOKEN, reads_need_token=False),
            heartbeat=0.2,
        )
        running = OfficeServer(office, "127.0.0.1", 0).start()
        yield Running(office, running, tmp_path)
        running.stop()


def test_a_desk_shows_the_text_as_it_is_written(browser, streaming_office: Running) -> None:
    office = streaming_office
    errors: list[str] = []
    page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(office.url + f"/#token={TOKEN}")
    expect(page.locator(".desk")).to_have_count(2)
    expect(page.locator("#conn")).to_have_text("live")
    sizes = page.eval_on_selector_all(".desk", "ds => ds.map(d => [d.offsetWidth, d.offsetHeight])")
    page.evaluate(WATCH)

    run = office.submit("Plan the quarter")
    desk = page.locator('.desk[data-agent="ceo"] .desk-thought')
    expect(desk).to_have_class("desk-thought streaming")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "desk-streaming.png"))
    office.finish(run["id"])
    # The paragraph landed in the log: the desk shows it, no longer streaming.
    expect(desk).not_to_have_class("desk-thought streaming")
    expect(desk).to_contain_text("Before handing anything out")

    with office.client(token=None) as c:
        events = c.get("/api/events", params={"task": run["id"]}).json()["events"]
    [logged] = [e for e in events if e["kind"] == "thought"]
    assert logged["data"]["text"] == SAID  # the log keeps the whole paragraph

    seen = page.evaluate("window.__seen")
    streamed = [(t, text.rstrip("▍")) for t, streaming, text in seen if streaming]
    # Many growing pieces of the paragraph were on the desk before it reached the log.
    early = {text for t, text in streamed if t < logged["ts"]}
    assert len(early) >= 5, streamed
    assert all(text.lstrip("…") in SAID for text in early)
    assert (
        page.eval_on_selector_all(".desk", "ds => ds.map(d => [d.offsetWidth, d.offsetHeight])")
        == sizes
    )
    assert not errors, errors


WATCH_3D = """() => {
  window.__said = [];
  setInterval(() => {
    const t = document.querySelector('.d3-task[data-agent="ceo"] .d3-said');
    if (t && !t.hidden) window.__said.push([Date.now() / 1000, t.textContent]);
  }, 20);
}"""


@pytest.fixture
def gl_browser(browser: Any) -> Iterator[Any]:
    """Chromium drawing WebGL in software: the 3D floor."""
    b = browser.browser_type.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS + WEBGL_ARGS)
    yield b
    b.close()


def test_a_3d_desk_shows_the_text_as_it_is_written(
    gl_browser: Any, streaming_office: Running
) -> None:
    office = streaming_office
    errors: list[str] = []
    page = gl_browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(office.url + f"/#token={TOKEN}")
    expect(page.locator("#conn")).to_have_text("live")
    # The 3D floor loads after the page: its desk labels are there once it is built.
    expect(page.locator('.d3-task[data-agent="ceo"]')).to_have_count(1)
    assert page.evaluate("window.__office.floor") == "3d"
    page.evaluate(WATCH_3D)

    run = office.submit("Plan the quarter")
    label = page.locator('.d3-task[data-agent="ceo"]')
    expect(label.locator(".d3-said")).to_be_visible()
    expect(label.locator(".d3-task-name")).to_have_text("Plan the quarter")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "desk-streaming-3d.png"))
    office.finish(run["id"])
    # The session ended: the desk is idle and shows no stream any more.
    expect(label.locator(".d3-said")).to_be_hidden()

    with office.client(token=None) as c:
        events = c.get("/api/events", params={"task": run["id"]}).json()["events"]
    [logged] = [e for e in events if e["kind"] == "thought"]
    said = page.evaluate("window.__said")
    # Growing pieces of the paragraph were above the desk before it reached the log.
    early = {text for t, text in said if t < logged["ts"]}
    assert len(early) >= 5, said
    assert all(text.lstrip("…") in SAID for text in early), said
    assert not errors, errors
