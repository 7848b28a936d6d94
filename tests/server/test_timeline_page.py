"""The timeline view in headless Chromium: a row per agent, a bar per session of the run's log,
parallel work side by side, the critical path marked, a click to the task, replay at a past
moment; and the critical path's walk itself, run in the page on runs built by hand."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser_kit import ARTIFACTS, ServedOffice, serve
from office_kit import TOKEN, Running

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

ORG_ORDER = ["ceo", "cto", "gabriel", "hana", "cmo", "maya", "omar"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedOffice]:
    office = serve(tmp_path_factory.mktemp("timeline"), "--sim-latency", "0.4")
    yield office
    office.close()


def open_page(browser, served: ServedOffice, errors: list[str], **context: Any):  # type: ignore[no-untyped-def]
    options = {"viewport": {"width": 1440, "height": 900}, **context}
    page = browser.new_context(**options).new_page()
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(served.url + f"/#token={served.token}")
    expect(page.locator("#conn")).to_have_text("live")
    return page


def client(served: ServedOffice) -> httpx.Client:
    headers = {"Authorization": f"Bearer {served.token}"}
    return httpx.Client(base_url=served.url, timeout=30, headers=headers)


def run_events(served: ServedOffice, run: str) -> list[dict[str, Any]]:
    with client(served) as c:
        return c.get(f"/api/runs/{run}/events", params={"limit": 5000}).json()["events"]


def wait_for_end(served: ServedOffice, run: str) -> None:
    with client(served) as c:
        for _ in range(1200):
            if c.get(f"/api/tasks/{run}").json()["status"] in ("done", "failed", "cancelled"):
                return
            time.sleep(0.05)
    raise AssertionError(f"{run} never ended")


def log_sessions(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each session of the log, read here independently of the page: started until its end."""
    agent_of = {e["task_id"]: e["data"]["to"] for e in events if e["kind"] == "delegated"}
    agent_of.update({e["task_id"]: e["agent"] for e in events if e["kind"] == "created"})
    ends = {"waiting", "completed", "failed", "cancelled", "requeued"}
    sessions: list[dict[str, Any]] = []
    open_: dict[str, dict[str, Any]] = {}
    for e in events:
        if e["kind"] == "started":
            open_[e["task_id"]] = {
                "task": e["task_id"],
                "agent": agent_of[e["task_id"]],
                "start": e["ts"],
            }
            sessions.append(open_[e["task_id"]])
        elif e["kind"] in ends and e["task_id"] in open_:
            open_.pop(e["task_id"])["end"] = e["ts"]
    return sessions


def bars(page) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """Every session bar: its agent, task, times (seconds from the run's start) and box."""
    return page.eval_on_selector_all(
        ".tl-bar[data-kind='session']",
        """(nodes) => nodes.map((n) => {
          const r = n.getBoundingClientRect();
          return {agent: n.dataset.agent, task: n.dataset.task, id: n.dataset.id,
                  outcome: n.dataset.outcome, critical: n.classList.contains('critical'),
                  start: Number(n.dataset.start), end: Number(n.dataset.end),
                  left: r.left, right: r.right, top: r.top};
        })""",
    )


def test_the_timeline_of_a_three_level_run(browser, served: ServedOffice) -> None:
    errors: list[str] = []
    page = open_page(browser, served, errors)
    page.get_by_role("tab", name="Timeline").click()
    expect(page.locator("#view-timeline .tl-empty")).to_be_visible()

    with client(served) as c:
        run = c.post("/api/tasks", json={"goal": "Launch an AI note-taking app"}).json()["id"]

    # Mid-run: something is working, drawn as running.
    expect(
        page.locator(".tl-bar[data-kind='session'][data-outcome='running']").first
    ).to_be_visible()
    expect(page.locator("#tl-caption")).to_have_attribute("data-run", run)

    wait_for_end(served, run)
    events = run_events(served, run)
    sessions = log_sessions(events)
    assert len(sessions) == sum(e["kind"] == "started" for e in events) > 7
    expect(page.locator(".tl-bar[data-kind='session']")).to_have_count(len(sessions))
    expect(page.locator(".tl-bar[data-outcome='running']")).to_have_count(0)

    # One row per agent of the run, in the org chart's order (each manager above its team).
    rows = page.eval_on_selector_all(
        ".tl-name",
        "(ns) => ns.sort((a, b) => a.offsetTop - b.offsetTop).map((n) => n.dataset.agent)",
    )
    assert rows == ORG_ORDER
    drawn = bars(page)
    top_of = {r: page.locator(f'.tl-name[data-agent="{r}"]').bounding_box()["y"] for r in rows}
    for bar in drawn:
        assert abs(bar["top"] - top_of[bar["agent"]]) < 30, bar  # each bar sits on its agent's row

    # Reports that worked at the same time in the log are drawn side by side in time.
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for bar in drawn:
        by_agent.setdefault(bar["agent"], []).append(bar)
    overlapping = 0
    for a, b in [("gabriel", "hana"), ("maya", "omar")]:
        ran = [s for s in sessions if s["agent"] == a], [s for s in sessions if s["agent"] == b]
        parallel = ran[0][0]["start"] < ran[1][0]["end"] and ran[1][0]["start"] < ran[0][0]["end"]
        x, y = by_agent[a][0], by_agent[b][0]
        assert (x["left"] < y["right"] and y["left"] < x["right"]) == parallel, (a, b, x, y)
        overlapping += parallel
    assert overlapping, "the demo's reports work in parallel (max_concurrent 4)"
    # And a manager's later session begins after its reports' results came back.
    cto = sorted(by_agent["cto"], key=lambda b: b["start"])
    assert cto[-1]["left"] >= max(b["right"] for b in by_agent["gabriel"] + by_agent["hana"]) - 2

    # The critical path: from the goal's first session to its last, through one branch.
    critical = [b for b in drawn if b["critical"]]
    chain = page.evaluate(
        """async (events) => {
          const {buildSessions} = await import('/sessions.js');
          const {criticalPath} = await import('/critical_path.js');
          return criticalPath(buildSessions(events)).chain.map((x) => x.id);
        }""",
        events,
    )
    assert {b["id"] for b in critical} == set(chain)
    assert chain[0] == f"{run}#1" and chain[-1].startswith(f"{run}#") and len(chain) >= 5
    expect(page.locator("#tl-path")).to_contain_text("Critical path: Ava Stone →")

    check_zoom_and_pan(page, sessions)

    # Hovering tells what the bar is; clicking opens its task.
    maya = page.locator(".tl-bar[data-kind='session'][data-agent='maya']").first
    maya.hover()
    expect(page.locator("#tl-tip")).to_be_visible()
    expect(page.locator("#tl-tip")).to_contain_text("Maya Chen")
    expect(page.locator("#tl-tip")).to_contain_text("Done")
    task = maya.get_attribute("data-task")
    with client(served) as c:
        title = c.get(f"/api/tasks/{task}").json()["title"]
    maya.click()
    expect(page.locator("#drawer")).to_be_visible()
    expect(page.locator("#drawer-title")).to_have_text(title)
    page.keyboard.press("Escape")

    # Replay at a past moment shows only the sessions begun by then.
    page.locator("#run-pick").select_option(run)
    expect(page.locator("#replay-controls")).to_be_visible()
    # A replay may start playing when picked: pause it, and wait until it has stopped, so the
    # position read below is the one the view shows.
    expect(page.locator("#tl-caption")).to_contain_text("Replay")
    if page.evaluate("window.__office.replay.playing"):
        page.locator("#replay-play").click()
    deadline = time.monotonic() + 30  # a guard against hangs, not a timing claim
    while page.evaluate("window.__office.replay.playing"):
        assert time.monotonic() < deadline, "the replay never paused"
        time.sleep(0.05)
    page.locator("#replay-scrub").evaluate(
        "(s) => { s.value = String(Math.round(Number(s.max) * 0.45));"
        " s.dispatchEvent(new Event('input', {bubbles: true})); }"
    )
    applied = page.evaluate("window.__office.replay.applied")
    begun = sum(e["kind"] == "started" for e in events[:applied])
    assert 0 < begun < len(sessions)
    expect(page.locator(".tl-bar[data-kind='session']")).to_have_count(begun)
    expect(page.locator("#tl-caption")).to_contain_text("Replay")
    # The picture mid-run for the artifacts, from the replay: a live run can end before a
    # loaded machine takes it.
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "timeline-midrun.png"))
    page.locator("#replay-end").click()
    expect(page.locator(".tl-bar[data-kind='session']")).to_have_count(len(sessions))
    page.locator("#replay-live").click()
    expect(page.locator("#tl-caption")).to_contain_text("Live")
    assert errors == []


def lane_box(page) -> dict[str, float]:  # type: ignore[no-untyped-def]
    box = page.locator(".tl-lanes").bounding_box()
    assert box is not None
    return box


def check_zoom_and_pan(page, sessions: list[dict[str, Any]]) -> None:  # type: ignore[no-untyped-def]
    """Zooming spreads a stretch of the run across the lanes; panning moves along it; the
    whole run comes back with one click. Bars outside the stretch leave the page."""
    whole = {b["id"]: b for b in bars(page)}
    lanes = lane_box(page)
    expect(page.locator("#tl-zoom-all")).to_be_disabled()

    # Ctrl + wheel over the lanes' left edge zooms in there: the first bars grow wider.
    first = min(whole.values(), key=lambda b: (b["start"], b["id"]))
    page.mouse.move(lanes["x"] + 2, lanes["y"] + 5)
    page.keyboard.down("Control")
    for _ in range(3):
        page.mouse.wheel(0, -200)
    page.keyboard.up("Control")
    expect(page.locator("#view-timeline")).to_have_attribute("data-zoomed", "true")
    expect(page.locator("#tl-caption")).to_contain_text(re.compile(r"showing 0(\.0s)?–\d"))
    expect(page.locator("#tl-zoom-all")).to_be_enabled()
    zoomed = {b["id"]: b for b in bars(page)}
    grown = zoomed[first["id"]]
    assert grown["right"] - grown["left"] > 1.5 * (first["right"] - first["left"]), (first, grown)
    # Only what overlaps the shown stretch is drawn: the run's last session is out of view.
    last = max(whole.values(), key=lambda b: (b["start"], b["id"]))
    assert last["id"] not in zoomed and len(zoomed) < len(sessions)

    # Dragging the lanes' background to the left moves later in the run.
    page.mouse.move(lanes["x"] + lanes["width"] * 0.8, lanes["y"] + lanes["height"] - 3)
    page.mouse.down()
    page.mouse.move(lanes["x"] + lanes["width"] * 0.2, lanes["y"] + lanes["height"] - 3, steps=5)
    page.mouse.up()
    panned = {b["id"]: b for b in bars(page)}
    # The stretch shown starts later, and what was drawn before and after moved left — or
    # stayed, a bar that covers the whole stretch (the goal's first session, started in the
    # run's own commit, can be all a stretch near the start shows).
    both = [i for i in panned if i in zoomed]
    assert all(panned[i]["left"] <= zoomed[i]["left"] for i in both), (zoomed, panned)
    assert all(panned[i]["right"] <= zoomed[i]["right"] for i in both), (zoomed, panned)
    start = re.search(r"showing ([\d.]+)s–", page.locator("#tl-caption").inner_text())
    assert both and start and float(start.group(1)) > 0

    # The keys work on the focused frame: End of the run with → until it stops, then 0.
    page.locator(".tl-frame").focus()
    for _ in range(80):
        page.keyboard.press("ArrowRight")
    expect(page.locator(f".tl-bar[data-id='{last['id']}']")).to_have_count(1)
    page.keyboard.press("0")
    expect(page.locator("#view-timeline")).to_have_attribute("data-zoomed", "false")
    expect(page.locator(".tl-bar[data-kind='session']")).to_have_count(len(sessions))
    # The buttons do the same.
    page.locator("#tl-zoom-in").click()
    expect(page.locator("#view-timeline")).to_have_attribute("data-zoomed", "true")
    page.locator("#tl-zoom-all").click()
    expect(page.locator("#view-timeline")).to_have_attribute("data-zoomed", "false")
    restored = {b["id"]: b for b in bars(page)}
    assert restored.keys() == whole.keys()
    for i, b in whole.items():
        assert (
            abs(restored[i]["left"] - b["left"]) < 1 and abs(restored[i]["right"] - b["right"]) < 1
        )


def test_the_timeline_at_a_phones_width_and_with_reduced_motion(
    browser, served: ServedOffice
) -> None:
    with client(served) as c:
        run = c.post("/api/tasks", json={"goal": "Plan the spring campaign"}).json()["id"]
    wait_for_end(served, run)
    errors: list[str] = []
    page = open_page(
        browser, served, errors, viewport={"width": 390, "height": 844}, reduced_motion="reduce"
    )
    page.get_by_role("tab", name="Timeline").click()
    expect(page.locator("#tl-caption")).to_have_attribute("data-run", run)
    expected = sum(e["kind"] == "started" for e in run_events(served, run))
    expect(page.locator(".tl-bar[data-kind='session']")).to_have_count(expected)
    frame = page.locator(".tl-frame").bounding_box()
    assert frame["x"] >= 0 and frame["x"] + frame["width"] <= 390
    for bar in bars(page):
        assert bar["left"] >= 0 and bar["right"] <= 390, bar
    transition = page.locator(".tl-bar").first.evaluate(
        "(n) => getComputedStyle(n).transitionDuration"
    )
    assert float(transition.removesuffix("s")) < 0.01  # nothing eases in under reduced motion
    page.screenshot(path=str(ARTIFACTS / "timeline-phone.png"))
    # "Everyone in the chart" adds the agents the run did not need: a row for each of the 7.
    page.locator("#tl-everyone").check()
    expect(page.locator(".tl-name")).to_have_count(7)
    assert errors == []


# --- the critical path on runs built by hand --------------------------------------------------


def ev(seq: int, ts: float, kind: str, task: str, agent: str, **data: Any) -> dict[str, Any]:
    return {"seq": seq, "ts": ts, "kind": kind, "task_id": task, "agent": agent, "data": data}


def two_branches(hana: float, maya: float) -> list[dict[str, Any]]:
    """The CEO hands one branch to the CTO (whose engineer Hana takes `hana` seconds) and one
    to the CMO (whose writer Maya takes `maya` seconds); whichever ends later decides the end."""
    a_done, b_done = 7 + hana + 2, 7 + maya + 3
    log: list[tuple[float, str, str, str, dict[str, Any]]] = [
        (0, "created", "R", "ceo", {"title": "Goal"}),
        (1, "started", "R", "ceo", {}),
        (2, "delegated", "A", "ceo", {"to": "cto", "parent_id": "R", "title": "Branch A"}),
        (2, "delegated", "B", "ceo", {"to": "cmo", "parent_id": "R", "title": "Branch B"}),
        (3, "waiting", "R", "ceo", {"open_subtasks": 2}),
        (4, "started", "A", "cto", {}),
        (4, "started", "B", "cmo", {}),
        (5, "delegated", "A1", "cto", {"to": "hana", "parent_id": "A", "title": "Hana's part"}),
        (5, "waiting", "A", "cto", {"open_subtasks": 1}),
        (6, "delegated", "B1", "cmo", {"to": "maya", "parent_id": "B", "title": "Maya's part"}),
        (6, "waiting", "B", "cmo", {"open_subtasks": 1}),
        (7, "started", "A1", "hana", {}),
        (7, "started", "B1", "maya", {}),
        (7 + hana, "completed", "A1", "hana", {}),
        (7 + hana, "woken", "A", "cto", {}),
        (8 + hana, "started", "A", "cto", {}),
        (a_done, "completed", "A", "cto", {}),
        (7 + maya, "completed", "B1", "maya", {}),
        (7 + maya, "woken", "B", "cmo", {}),
        (8 + maya, "started", "B", "cmo", {}),
        (b_done, "completed", "B", "cmo", {}),
        (max(a_done, b_done), "woken", "R", "ceo", {}),
        (max(a_done, b_done) + 1, "started", "R", "ceo", {}),
        (max(a_done, b_done) + 3, "completed", "R", "ceo", {}),
    ]
    log.sort(key=lambda row: row[0])  # stable: at the same moment, the order written above
    return [ev(i + 1, 1000 + t, k, task, a, **d) for i, (t, k, task, a, d) in enumerate(log)]


def held_by_a_person() -> list[dict[str, Any]]:
    """The CEO's short report is done in seconds, but a call waits 50 seconds for a person."""
    log: list[tuple[float, str, str, str, dict[str, Any]]] = [
        (0, "created", "R", "ceo", {"title": "Goal"}),
        (1, "started", "R", "ceo", {}),
        (2, "delegated", "A", "ceo", {"to": "cto", "parent_id": "R", "title": "Short"}),
        (2, "approval_requested", "R", "ceo", {"id": "ap1"}),
        (3, "waiting", "R", "ceo", {"open_subtasks": 1, "pending_approvals": 1}),
        (4, "started", "A", "cto", {}),
        (6, "completed", "A", "cto", {}),
        (53, "approval_decided", "R", "ceo", {"id": "ap1", "decision": "approved"}),
        (53, "woken", "R", "ceo", {}),
        (54, "started", "R", "ceo", {}),
        (55, "completed", "R", "ceo", {}),
    ]
    return [ev(i + 1, 1000 + t, k, task, a, **d) for i, (t, k, task, a, d) in enumerate(log)]


CRITICAL = """async (events) => {
  const {buildSessions} = await import('/sessions.js');
  const {criticalPath} = await import('/critical_path.js');
  const model = buildSessions(events);
  const path = criticalPath(model, 'R');
  return {
    chain: path.chain.map((x) => x.id),
    links: [...path.links]
      .map((i) => model.links[i])
      .map((l) => `${l.kind}:${l.from}>${l.to}`)
      .sort(),
    sessions: model.sessions.length,
    waits: model.waits.map((w) => [w.id, w.person, w.end - w.start]),
  };
}"""


def test_the_critical_path_follows_the_branch_that_ended_last(
    browser, served: ServedOffice
) -> None:
    errors: list[str] = []
    page = open_page(browser, served, errors)
    got = page.evaluate(CRITICAL, two_branches(hana=2, maya=30))
    assert got["chain"] == ["R#1", "B#1", "B1#1", "B#2", "R#2"]
    assert got["links"] == [
        "delegation:B#1>B1#1",
        "delegation:R#1>B#1",
        "result:B#2>R#2",
        "result:B1#1>B#2",
    ]
    assert got["sessions"] == 8
    assert [w[0] for w in got["waits"]] == ["R~1", "A~1", "B~1"]
    # Half-way through, the path so far leads to the work that has run the longest: Maya's.
    halfway = [e for e in two_branches(hana=2, maya=30) if e["ts"] < 1020]
    assert page.evaluate(CRITICAL, halfway)["chain"] == ["R#1", "B#1", "B1#1"]
    # Made Hana's part the slow one instead, the path moves over to the CTO's branch.
    swapped = page.evaluate(CRITICAL, two_branches(hana=30, maya=2))
    assert swapped["chain"] == ["R#1", "A#1", "A1#1", "A#2", "R#2"]

    person = page.evaluate(CRITICAL, held_by_a_person())
    assert person["chain"] == ["R#1", "R~1", "R#2"]
    assert person["waits"] == [["R~1", True, 50]]
    assert errors == []


# --- a company of a hundred -------------------------------------------------------------------


def big_company(folder: Path, n: int) -> Path:
    """A CEO with nine reports, every other manager with ten: n agents in all."""
    lines = ["company: Big Co", "max_concurrent: 8", "agents:"]
    lines.append("  - {id: a0, name: Agent 0, title: Chief Executive Officer}")
    made, queue = 1, [0]
    while made < n:
        boss = queue.pop(0)
        for _ in range(9 if boss == 0 else 10):
            if made < n:
                lines.append(
                    f"  - {{id: a{made}, name: Agent {made}, title: Staff, reports_to: a{boss}}}"
                )
                queue.append(made)
                made += 1
    path = folder / "big.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_hundred_agents_scroll_and_only_the_path_is_linked(
    browser, fresh_office: Callable[..., Running], tmp_path: Path
) -> None:
    office = fresh_office(org=big_company(tmp_path, 120))
    run = office.submit("Grow the business")["id"]
    office.finish(run, timeout=300)
    errors: list[str] = []
    page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(office.url + f"/#token={TOKEN}")
    expect(page.locator("#conn")).to_have_text("live")
    page.get_by_role("tab", name="Timeline").click()
    timeline = page.locator("#view-timeline")
    expect(timeline).to_have_attribute("data-agents", "120")

    # Only the rows in view (and a few around them) are in the page; scrolling brings the rest.
    # Rows go depth first (a0, a1, a10, a100 … a109, a11, …), so a9's last report, a99, is last.
    shown = page.locator(".tl-name").count()
    assert 10 < shown < 60, shown
    expect(page.locator('.tl-name[data-agent="a99"]')).to_have_count(0)
    page.locator(".tl-frame").evaluate("(f) => { f.scrollTop = f.scrollHeight; }")
    expect(page.locator('.tl-name[data-agent="a99"]')).to_be_visible()
    expect(page.locator('.tl-name[data-agent="a0"]')).to_have_count(0)
    expect(page.locator('.tl-bar[data-agent="a99"]').first).to_be_visible()

    # With some 240 hand-offs, only the critical path's are drawn; hovering a bar adds its own.
    expect(timeline).to_have_attribute("data-dense", "true")
    page.locator(".tl-frame").evaluate("(f) => { f.scrollTop = 0; }")
    expect(page.locator('.tl-name[data-agent="a0"]')).to_be_visible()
    expect(page.locator(".tl-link.critical").first).to_be_attached()
    assert page.locator(".tl-link:not(.critical)").count() == 0
    page.locator('.tl-bar[data-kind="session"][data-agent="a1"]').first.hover()
    expect(page.locator(".tl-link.hot-link").first).to_be_attached()
    assert errors == []


def test_with_several_goals_live_the_timeline_shows_the_one_picked(
    browser, served: ServedOffice
) -> None:
    errors: list[str] = []
    page = open_page(browser, served, errors)
    page.get_by_role("tab", name="Timeline").click()
    with client(served) as c:
        first = c.post("/api/tasks", json={"goal": "Write the launch plan"}).json()["id"]
        second = c.post("/api/tasks", json={"goal": "Draft the pricing page"}).json()["id"]

    # By default the newest goal; the picker offers every goal on the page. (The run's events
    # load first: a loaded machine can take seconds.)
    expect(page.locator("#tl-caption")).to_have_attribute("data-run", second)
    picker = page.locator("#tl-goal")
    expect(picker).to_be_visible()
    expect(picker.locator(f"option[value='{first}']")).to_contain_text("Write the launch plan")

    picker.select_option(first)
    expect(page.locator("#tl-caption")).to_have_attribute("data-run", first)
    expect(page.locator("#tl-caption")).to_contain_text("Write the launch plan")
    wait_for_end(served, first)
    sessions = log_sessions(run_events(served, first))
    expect(page.locator(".tl-bar[data-kind='session']")).to_have_count(len(sessions))
    assert {b["task"].split("#")[0] for b in bars(page)} <= {
        e["task"] for e in sessions
    }  # only the picked goal's sessions

    # A third goal does not take the view away from the one picked…
    with client(served) as c:
        third = c.post("/api/tasks", json={"goal": "Plan the beta"}).json()["id"]
    expect(picker.locator(f"option[value='{third}']")).to_have_count(1)
    expect(page.locator("#tl-caption")).to_have_attribute("data-run", first)
    # …until "The newest goal" is picked again.
    picker.select_option("")
    expect(page.locator("#tl-caption")).to_have_attribute("data-run", third)
    wait_for_end(served, second)
    wait_for_end(served, third)
    assert errors == []
