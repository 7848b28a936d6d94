"""The activity feed grouped by goal, with the audit trail's checkpoints out of the way and a
legend for the page's colours, in headless Chromium against a real office."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from browser_kit import ARTIFACTS
from office_kit import TOKEN, Running

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

ROWS = "#feed-list > li"


def test_the_feed_groups_lines_by_goal(browser, fresh_office: Callable[..., Running]) -> None:
    office = fresh_office(latency=0.1)
    errors: list[str] = []
    page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(office.url + f"/#token={TOKEN}")
    expect(page.locator("#conn")).to_have_text("live")

    first = office.submit("Rebuild the search backend", to="cto")
    office.finish(first["id"])
    second = office.submit("Plan the spring campaign", to="cmo")
    office.finish(second["id"])
    heads = page.locator("#feed-list > li.feed-head")
    expect(heads).to_have_count(2)
    # The newest goal first, each heading with its goal's title and status.
    expect(heads.nth(0)).to_have_attribute("data-run", second["id"])
    expect(heads.nth(0)).to_contain_text("Plan the spring campaign")
    expect(heads.nth(1)).to_contain_text("Rebuild the search backend")
    # Within a goal, the newest line first: from its ending down to its start.
    mine = page.locator(f'#feed-list .feed-item[data-run="{second["id"]}"]')
    expect(mine.first).to_contain_text("finished “Plan the spring campaign”")
    expect(mine.last).to_contain_text("New goal for Cleo Park")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "feed-grouped.png"))

    # Every line sits under its own goal's heading.
    runs = page.eval_on_selector_all(ROWS, "rows => rows.map(r => [r.className, r.dataset.run])")
    current = None
    for cls, run in runs:
        if cls.startswith("feed-head"):
            current = run
        else:
            assert run == current, runs
    lines = page.locator(f'#feed-list .feed-item[data-run="{first["id"]}"]')
    count = lines.count()
    assert count >= 5

    # A heading folds its goal's lines away and opens them again.
    toggle = heads.nth(1).locator(".feed-toggle")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(lines).to_have_count(0)
    toggle.click()
    expect(lines).to_have_count(count)

    # Checkpoints stay out of the way until asked for, then as muted lines in a group last.
    expect(page.locator("#feed-list .t-audit")).to_have_count(0)
    page.get_by_label("Audit checkpoints").check()
    expect(page.locator("#feed-list .feed-head.audit")).to_have_count(1)
    expect(page.locator("#feed-list .t-audit").first).to_contain_text("Checkpoint")
    assert "t-audit" in page.eval_on_selector_all(ROWS, "rows => rows.at(-1).className")
    page.get_by_label("Audit checkpoints").uncheck()
    expect(page.locator("#feed-list .t-audit")).to_have_count(0)

    # The legend explains the colours: desk lights, arcs, the feed's tones, cost, streaming.
    page.locator("#legend summary").click()
    legend = page.locator("#legend ul")
    expect(legend).to_be_visible()
    for words in ("Working on a task", "an arc of a task handed down", "a heading per goal"):
        expect(legend).to_contain_text(words)
    assert not errors, errors
