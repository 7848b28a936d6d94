"""Counting what the snapshot leaves out: a live view starts from every open task and the
newest few hundred, yet its status counts and each goal's progress count every task."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from office_kit import TOKEN, Running

from firm.server.office import SNAPSHOT_RECENT

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect


def test_counts_include_the_tasks_the_snapshot_leaves_out(
    browser, fresh_office: Callable[..., Running]
) -> None:
    office = fresh_office()
    goals = [office.submit(f"Goal number {i}")["id"] for i in range(SNAPSHOT_RECENT // 7 + 5)]
    for goal in goals:
        office.finish(goal, timeout=120)
    with office.client() as c:
        runs = c.get("/api/runs", params={"limit": 200}).json()["runs"]
    per_run = {r["id"]: r["counts"] for r in runs}
    total = sum(sum(c.values()) for c in per_run.values())
    assert total > SNAPSHOT_RECENT

    with office.ws(f"token={TOKEN}") as ws:
        snap: dict[str, Any] = json.loads(ws.recv())
    assert snap["type"] == "snapshot"
    assert len(snap["tasks"]) < total  # the snapshot sends only the newest tasks…
    assert snap["counts"] == {"done": total}  # …and counts all of them
    # A goal whose tasks were partly left out is counted whole.
    sent = {t["root_id"] for t in snap["tasks"]}
    assert snap["root_counts"] and set(snap["root_counts"]) == sent
    for root, counts in snap["root_counts"].items():
        assert counts == per_run[root]
    cut = [r for r in sent if sum(t["root_id"] == r for t in snap["tasks"]) < 7]
    assert cut, "the oldest goal in the snapshot is only partly there"

    # The page's header counts every task, not only those it was sent.
    errors: list[str] = []
    page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(office.url + f"/#token={TOKEN}")
    expect(page.locator("#conn")).to_have_text("live")
    expect(page.locator(".stat.s-done b")).to_have_text(str(total))
    progress = page.evaluate("(root) => window.__office.company.counts(root).done", cut[0])
    assert progress == per_run[cut[0]]["done"] == 7
    assert errors == []
