"""Replay in the office page, in headless Chromium: pick a past run, scrub, play, jump to the
end, and find exactly the state the live page reached when the run ended."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from browser_kit import ARTIFACTS, ServedOffice, serve

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedOffice]:
    office = serve(tmp_path_factory.mktemp("replay"), "--sim-latency", "0.2")
    yield office
    office.close()


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedOffice]:
    """Turns slow enough that a cancel lands while the run works, however loaded the machine."""
    office = serve(tmp_path_factory.mktemp("replay-slow"), "--sim-latency", "1.5")
    yield office
    office.close()


def open_page(browser, served: ServedOffice, errors: list[str]):  # type: ignore[no-untyped-def]
    page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(served.url + f"/#token={served.token}")
    expect(page.locator("#conn")).to_have_text("live")
    return page


def wait_for_end(served: ServedOffice, task_id: str) -> dict[str, Any]:
    with httpx.Client(base_url=served.url, timeout=30) as c:
        for _ in range(1200):
            task = c.get(f"/api/tasks/{task_id}").json()
            if task["status"] in ("done", "failed", "cancelled"):
                return task
            time.sleep(0.05)
    raise AssertionError(f"{task_id} never ended")


def summary(page, root: str | None = None) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return page.evaluate("(root) => window.__office.summary(root)", root)


def choose_run(page, run_id: str) -> None:  # type: ignore[no-untyped-def]
    picker = page.locator("#run-pick")
    expect(picker.locator(f'option[value="{run_id}"]')).to_have_count(1)
    picker.select_option(run_id)
    expect(page.locator("#replay-controls")).to_be_visible()


def test_a_replay_ends_in_the_state_the_live_page_reached(browser, served: ServedOffice) -> None:
    errors: list[str] = []
    page = open_page(browser, served, errors)
    with httpx.Client(base_url=served.url, timeout=30) as c:
        r = c.post(
            "/api/tasks",
            json={"goal": "Launch an AI note-taking app"},
            headers={"Authorization": f"Bearer {served.token}"},
        )
    root = r.json()["id"]
    wait_for_end(served, root)
    page.wait_for_function(
        "(root) => window.__office.summary(root).tasks.every((t) => t.status === 'done')"
        " && window.__office.summary(root).tasks.length === 7",
        arg=root,
    )
    live = summary(page)
    # A page opened afterwards (from a snapshot rather than from events) agrees on the tasks.
    later = open_page(browser, served, errors)
    expect(later.locator(".desk")).to_have_count(7)
    assert summary(later)["tasks"] == live["tasks"]

    choose_run(page, root)
    page.locator("#replay-end").click()
    expect(page.locator("body")).to_have_attribute("data-replay-at", "end")
    assert page.evaluate("window.__office.mode") == "replay"
    assert summary(page) == live

    # At the start only the goal exists, already started (the engine it was submitted to
    # claimed it in the run's own commit); the board agrees.
    page.locator("#replay-start").click()
    start = summary(page)
    assert [(t["id"], t["status"]) for t in start["tasks"]] == [(root, "in_progress")]
    assert [a for a, d in start["desks"].items() if d["state"] not in ("idle", "queued")] == ["ceo"]
    page.get_by_role("tab", name="Board").click()
    expect(page.locator(".column[data-status='done'] .cards > li")).to_have_count(0)
    expect(page.locator(".column[data-status='in_progress'] .cards > li")).to_have_count(1)
    page.get_by_role("tab", name="Office").click()

    # Half-way, work is under way: some tasks exist, not all are done.
    page.locator("#replay-scrub").evaluate(
        "(s) => { s.value = String(Math.round(Number(s.max) / 2));"
        " s.dispatchEvent(new Event('input', {bubbles: true})); }"
    )
    mid = summary(page)
    assert len(mid["tasks"]) > 1 and not all(t["status"] == "done" for t in mid["tasks"])
    assert any(d["state"] in ("working", "waiting") for d in mid["desks"].values())
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "replay-midway.png"))

    # The drawer shows a task as it was at that moment, with no Cancel to press.
    page.locator(".feed-item button.feed-text").first.click()
    expect(page.locator("#drawer")).to_be_visible()
    expect(page.locator("#drawer [data-action='cancel']")).to_have_count(0)
    page.keyboard.press("Escape")

    # Playing at 60× runs on to the end by itself, into the same state.
    page.locator("#replay-speed").select_option("60")
    page.locator("#replay-play").click()
    expect(page.locator("body")).to_have_attribute("data-replay-at", "end")
    assert summary(page) == live

    # "Live" returns to the company as it is now.
    page.locator("#replay-live").click()
    assert page.evaluate("window.__office.mode") == "live"
    expect(page.locator("#replay-controls")).to_be_hidden()
    assert summary(page) == live
    assert errors == []


def test_a_replay_of_a_cancelled_run_ends_where_the_live_page_did(
    browser, slow: ServedOffice
) -> None:
    """A cancel is one log entry for the whole subtree: live, the page and its replay both
    turn it into every task's ending, and the feed says it in one line."""
    errors: list[str] = []
    page = open_page(browser, slow, errors)
    auth = {"Authorization": f"Bearer {slow.token}"}
    with httpx.Client(base_url=slow.url, timeout=30) as c:
        root = c.post("/api/tasks", json={"goal": "Plan a product launch"}, headers=auth).json()[
            "id"
        ]
        page.wait_for_function(
            "(root) => { const ts = window.__office.summary(root).tasks;"
            " return ts.length >= 3 && ts.some((t) => t.status !== 'todo' && t.parent_id); }",
            arg=root,
        )
        r = c.post(f"/api/tasks/{root}/cancel", json={"reason": "the launch is off"}, headers=auth)
        assert r.status_code == 200, r.text
        n = len(r.json()["cancelled"])
        assert n >= 2  # the goal and work under way below it
    assert wait_for_end(slow, root)["status"] == "cancelled"
    page.wait_for_function(
        "(root) => window.__office.summary(root).tasks.every((t) =>"
        " ['done', 'failed', 'cancelled'].includes(t.status))",
        arg=root,
    )
    live = summary(page, root)
    cancelled = [t for t in live["tasks"] if t["status"] == "cancelled"]
    assert len(cancelled) == n and all(t["error"] == "the launch is off" for t in cancelled)
    line = page.locator(".feed-text", has_text="the launch is off")
    expect(line).to_have_count(1)
    expect(line).to_contain_text(f"cancelled {n} task")

    choose_run(page, root)
    page.locator("#replay-end").click()
    expect(page.locator("body")).to_have_attribute("data-replay-at", "end")
    # The tasks as the live page has them (desks also show the earlier test's run).
    assert summary(page, root)["tasks"] == live["tasks"]
    page.locator("#replay-live").click()
    assert errors == []
