"""The office page in headless Chromium, as a person uses it: give a goal, watch it travel down
the org chart and back, read the results and files, cancel work, at laptop and phone width,
with the keyboard, with reduced motion."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_kit import ARTIFACTS, ServedOffice, serve

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

LEAVES = ("gabriel", "hana", "maya", "omar")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedOffice]:
    office = serve(tmp_path_factory.mktemp("page"), "--sim-latency", "0.4")
    yield office
    office.close()


@pytest.fixture
def page_errors() -> list[str]:
    return []


def open_page(browser, served: ServedOffice, errors: list[str], token: bool = True, **context):  # type: ignore[no-untyped-def]
    ctx = browser.new_context(**context)
    page = ctx.new_page()
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(served.url + (f"/#token={served.token}" if token else "/"))
    expect(page.locator(".desk")).to_have_count(7)
    expect(page.locator("#conn")).to_have_text("live")
    return page


def give_goal(page, goal: str) -> str:  # type: ignore[no-untyped-def]
    page.locator("#goal-input").fill(goal)
    page.locator("#goal-input").press("Enter")
    toast = page.locator(".toast", has_text="given to")
    expect(toast).to_be_visible()
    found = re.search(r"Goal (T-[0-9a-f]+)", toast.inner_text())
    assert found, toast.inner_text()
    return found.group(1)


def counter(page, name: str) -> int:  # type: ignore[no-untyped-def]
    return int(page.locator("#flights").get_attribute(f"data-{name}") or 0)


def test_a_goal_travels_down_the_org_chart_and_back(
    browser, served: ServedOffice, page_errors: list[str]
) -> None:
    page = open_page(browser, served, page_errors, viewport={"width": 1440, "height": 900})
    assert "token" not in page.url  # taken from the address, kept out of history
    root = give_goal(page, "Launch an AI note-taking app")

    # Delegations fly from each manager's desk to each report's.
    page.wait_for_function(
        "() => Number(document.querySelector('#flights').dataset.delegations) >= 6"
    )
    expect(page.locator('.desk[data-agent="ceo"]')).to_have_attribute("data-state", "waiting")
    expect(page.locator('.desk[data-agent="ceo"] .desk-state')).to_have_text("Waiting on 2 reports")
    working = page.locator(".desk[data-state='working']")
    expect(working.first).to_be_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "office-midrun.png"))
    assert page.locator(".desk-thought:visible").count() >= 1  # a manager's latest thought

    # Results fly back up as each report finishes.
    page.wait_for_function("() => Number(document.querySelector('#flights').dataset.results) >= 6")

    page.get_by_role("tab", name="Board").click()
    done = page.locator('.column[data-status="done"] .cards > li')
    expect(done).to_have_count(7)
    expect(page.locator('.column[data-status="done"] .count')).to_have_text("7")
    for status in ("todo", "in_progress", "waiting", "failed", "cancelled"):
        expect(page.locator(f'.column[data-status="{status}"] .cards > li')).to_have_count(0)

    # The drawer: the whole tree, the result, the files.
    page.locator(f'.card[data-task="{root}"]').click()
    drawer = page.locator("#drawer")
    expect(drawer).to_be_visible()
    expect(drawer.locator("#drawer-id")).to_have_text(root)
    expect(drawer.locator(".pill")).to_have_text(re.compile("Done"))
    expect(drawer.locator(".tree-item")).to_have_count(6)
    expect(drawer.locator(".tree-item[data-status='done']")).to_have_count(6)
    files = drawer.locator("button.file")
    assert files.count() >= 7
    files.first.click()
    viewer = page.locator("#file-viewer")
    expect(viewer).to_be_visible()
    expect(viewer.locator("#viewer-title")).to_have_text(re.compile(r"^ceo/.*\.md$"))
    expect(viewer.locator(".md h3").first).to_contain_text("Launch an AI note-taking app")

    # Escape closes the file, then the drawer, and focus goes back to the card.
    page.keyboard.press("Escape")
    expect(viewer).to_be_hidden()
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()
    assert page.evaluate("document.activeElement.dataset.task") == root

    # The org chart and the activity feed tell the same story.
    page.get_by_role("tab", name="Org chart").click()
    expect(page.locator(".org-node")).to_have_count(7)
    feed = page.locator("#feed-list")
    expect(feed.locator(".feed-item", has_text="Ava Stone → Ben Ode")).to_have_count(1)
    finished = feed.locator(".feed-item", has_text="finished “Launch an AI note-taking app”")
    expect(finished).to_have_count(1)
    assert not page_errors, page_errors
    page.context.close()


def test_cancel_a_running_task_from_its_drawer(browser, tmp_path: Path, page_errors) -> None:  # type: ignore[no-untyped-def]
    slow = serve(tmp_path, "--sim-latency", "1.5")
    try:
        page = open_page(browser, slow, page_errors, viewport={"width": 1280, "height": 800})
        root = give_goal(page, "Organise the summer party")
        # Wait until the CEO has handed the work out, then open its task from its desk.
        expect(page.locator('.desk[data-agent="ceo"]')).to_have_attribute("data-state", "waiting")
        page.locator('.desk[data-agent="ceo"] .desk-task').click()
        drawer = page.locator("#drawer")
        expect(drawer.locator("#drawer-id")).to_have_text(root)
        expect(drawer.locator(".tree-item")).not_to_have_count(0)
        cancel = drawer.locator("[data-action=cancel]")
        expect(cancel).to_contain_text("Cancel task")
        cancel.click()

        expect(drawer.locator(".pill").first).to_have_text(re.compile("Cancelled"))
        expect(drawer.locator(".reason")).to_contain_text("cancelled from the office")
        expect(drawer.locator("[data-action=cancel]")).to_have_count(0)
        expect(drawer.locator(".tree-item[data-status='in_progress']")).to_have_count(0)
        expect(drawer.locator(".tree-item[data-status='todo']")).to_have_count(0)
        page.keyboard.press("Escape")

        page.get_by_role("tab", name="Board").click()
        cancelled = page.locator('.column[data-status="cancelled"] .cards > li')
        expect(cancelled.first).to_be_visible()
        assert cancelled.count() >= 3  # the goal and the managers' open subtasks
        for status in ("todo", "in_progress", "waiting"):
            expect(page.locator(f'.column[data-status="{status}"] .cards > li')).to_have_count(0)
        # The desks go quiet.
        page.get_by_role("tab", name="Office").click()
        expect(page.locator(".desk[data-state='working']")).to_have_count(0)
        assert not page_errors, page_errors
        page.context.close()
    finally:
        slow.close()


def test_phone_width_keyboard_only_and_reduced_motion(
    browser, served: ServedOffice, page_errors: list[str]
) -> None:
    page = open_page(
        browser,
        served,
        page_errors,
        viewport={"width": 390, "height": 844},
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
        reduced_motion="reduce",
    )
    # Nothing sticks out sideways at phone width.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")

    # Keyboard only: "g" jumps to the goal box; Enter gives the goal.
    page.locator("body").press("g")
    assert page.evaluate("document.activeElement.id") == "goal-input"
    page.keyboard.type("Write the onboarding guide")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "goal-to"
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.locator(".toast", has_text="given to")).to_be_visible()

    # Delegations are counted, and land on the desks, but nothing flies.
    page.wait_for_function(
        "() => Number(document.querySelector('#flights').dataset.delegations) >= 6"
    )
    assert page.locator(".flight").count() == 0
    page.screenshot(path=str(ARTIFACTS / "office-phone.png"), full_page=False)

    # The tabs are a tablist: arrow keys move between views.
    page.get_by_role("tab", name="Office").focus()
    page.keyboard.press("ArrowRight")
    expect(page.get_by_role("tab", name="Board")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#view-board")).to_be_visible()
    expect(page.locator("#view-floor")).to_be_hidden()
    page.keyboard.press("End")
    expect(page.get_by_role("tab", name="Activity")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#feed-list .feed-item").first).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    assert not page_errors, page_errors
    page.context.close()


def test_without_the_token_the_page_asks_for_it(
    browser, served: ServedOffice, page_errors: list[str]
) -> None:
    page = open_page(browser, served, page_errors, token=False)
    page.locator("#goal-input").fill("Sign the lease")
    page.get_by_role("button", name="Give goal").click()
    dialog = page.locator("#token-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("access token")
    page.locator("#token-input").fill(served.token)
    page.get_by_role("button", name="Use token").click()
    expect(page.locator(".toast", has_text="given to")).to_be_visible()
    # The browser console logs the refused request itself; nothing else went wrong.
    assert [e for e in page_errors if "401" not in e] == []
    page.context.close()
