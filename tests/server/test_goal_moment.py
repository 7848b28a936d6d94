"""The goal's moment in the page, in headless Chromium: a banner per outcome (done, done with
parts not delivered, failed, cancelled) with the report a click away, progress while a goal
runs, and a tab whose token went stale that keeps watching on loopback."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from browser_kit import ARTIFACTS
from office_kit import TOKEN, Running

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect


def open_page(browser, office: Running, errors: list[str], token: str = TOKEN):  # type: ignore[no-untyped-def]
    page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(office.url + f"/#token={token}")
    expect(page.locator(".desk")).to_have_count(7)
    expect(page.locator("#conn")).to_have_text("live")
    return page


def banner_for(page, run_id: str):  # type: ignore[no-untyped-def]
    banner = page.locator(f'#goal-banner[data-run="{run_id}"]')
    expect(banner).to_be_visible(timeout=60_000)
    return banner


def test_a_banner_per_outcome(browser, fresh_office: Callable[..., Running]) -> None:
    office = fresh_office(latency=0.3, fail=["maya"])
    errors: list[str] = []
    page = open_page(browser, office, errors)
    ARTIFACTS.mkdir(exist_ok=True)

    cases: list[tuple[str, dict[str, Any], str]] = [
        ("Rebuild the search backend", {"to": "cto"}, "done"),
        ("Launch an AI note-taking app", {}, "partial"),  # Maya's part fails below the CMO
        ("Write the launch post", {"to": "maya"}, "failed"),
    ]
    for goal, extra, outcome in cases:
        run = office.submit(goal, **extra)
        if outcome == "partial":
            chip = page.locator(f'#progress li[data-run="{run["id"]}"]')
            expect(chip).to_have_text(re.compile(r"\d+/\d+"))
        banner = banner_for(page, run["id"])
        expect(banner).to_have_attribute("data-outcome", outcome)
        page.screenshot(path=str(ARTIFACTS / f"goal-banner-{outcome}.png"))
        detail = office.task(run["id"])
        if outcome == "failed":
            expect(banner.locator(".banner-result")).to_contain_text(detail["error"].split("\n")[0])
            expect(banner).to_have_attribute("role", "alert")
        else:
            first = next(line for line in detail["result"].split("\n") if line.strip())
            expect(banner.locator(".banner-result")).to_contain_text(first.strip()[:40])
        if outcome == "partial":
            expect(banner.locator(".banner-detail")).to_contain_text("1 failed")
        expect(page.locator(f'#progress li[data-run="{run["id"]}"]')).to_have_count(0)

    banner = page.locator("#goal-banner")
    banner.get_by_role("button", name="Open the report").click()
    expect(page.locator("#drawer-title")).to_have_text("Write the launch post")
    page.keyboard.press("Escape")
    banner.get_by_role("button", name="Dismiss").click()
    expect(banner).to_be_hidden()

    run = office.submit("Plan the spring campaign")
    with office.client() as c:
        assert c.post(f"/api/tasks/{run['id']}/cancel", json={}).status_code == 200
    expect(banner_for(page, run["id"])).to_have_attribute("data-outcome", "cancelled")
    page.screenshot(path=str(ARTIFACTS / "goal-banner-cancelled.png"))
    assert errors == []


def test_a_stale_token_keeps_watching_on_loopback(browser, office: Running) -> None:
    errors: list[str] = []
    page = open_page(browser, office, errors, token="token-from-before-a-restart")
    run = office.submit("Rebuild the search backend", to="cto")
    expect(banner_for(page, run["id"])).to_have_attribute("data-outcome", "done")
    expect(page.locator("#token-dialog")).not_to_be_visible()  # watching asks for nothing

    # Acting does ask, and goes through with the right token.
    page.locator("#goal-input").fill("Rebuild the billing service")
    page.locator("#goal-input").press("Enter")
    expect(page.locator("#token-dialog")).to_be_visible()
    page.locator("#token-input").fill(TOKEN)
    page.locator("#token-input").press("Enter")
    expect(page.locator("#token-dialog")).to_be_hidden()
    for _ in range(600):  # the goal went in with the new token
        with office.client(token=None) as c:
            tasks = c.get("/api/tasks", params={"limit": 1000}).json()["tasks"]
        if any(t["title"] == "Rebuild the billing service" for t in tasks):
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the goal given after entering the token never arrived")
    # The refused POST is the only error the browser logs.
    assert [e for e in errors if "401" not in e] == []


WATCH_DESKS = """() => {
  window.__cls = 0;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) if (!e.hadRecentInput) window.__cls += e.value;
  }).observe({ type: "layout-shift", buffered: false });
  window.__ceo = [];
  setInterval(() => {
    const desk = document.querySelector('.desk[data-agent="ceo"]');
    const thought = desk.querySelector(".desk-thought:not(.empty)");
    window.__ceo.push([desk.dataset.state, desk.querySelector(".desk-task")?.title ?? "",
                       thought ? thought.textContent : ""]);
  }, 15);
}"""


def test_desks_tell_the_truth_and_keep_their_size(
    browser, fresh_office: Callable[..., Running]
) -> None:
    office = fresh_office(latency=0.3)
    errors: list[str] = []
    page = open_page(browser, office, errors)
    sizes = page.eval_on_selector_all(".desk", "ds => ds.map(d => [d.offsetWidth, d.offsetHeight])")
    page.evaluate(WATCH_DESKS)

    first = office.submit("Launch an AI note-taking app")
    expect(banner_for(page, first["id"])).to_have_attribute("data-outcome", "done")
    second = office.submit("Rebuild the billing service")
    expect(banner_for(page, second["id"])).to_have_attribute("data-outcome", "done")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "desks-after-two-goals.png"))

    samples = page.evaluate("window.__ceo")
    working = [s for s in samples if s[0] in ("working", "waiting")]
    assert {s[1] for s in working} == {first["title"], second["title"]}  # it saw both goals
    # The CEO's thought is always about the task its desk shows, never the one before.
    for state, title, thought in samples:
        if thought and state in ("working", "waiting"):
            assert f"'{title}'" in thought, (state, title, thought)
    assert any(s[2] and s[1] == second["title"] for s in working)  # the new thought did come

    # Every desk kept its size, and the page did not jump while two goals streamed.
    assert (
        page.eval_on_selector_all(".desk", "ds => ds.map(d => [d.offsetWidth, d.offsetHeight])")
        == sizes
    )
    cls = page.evaluate("window.__cls")
    assert cls < 0.1
    assert errors == []
