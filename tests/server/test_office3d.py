"""The office in 3D, in headless Chromium drawing WebGL with SwiftShader: the floor is drawn,
fitting the view shows every desk of a 60-agent company, a click on a desk opens its task,
the plan replaces the 3D floor under reduced motion and when a person chooses it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_kit import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    WEBGL_ARGS,
    ensure_chromium,
    png_pixels,
)
from office_kit import Running, start_office

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect


def big_company(folder: Path) -> Path:
    """CEO → 4 directors → 2 managers each → 6 engineers each (one has 5): 60 agents in three
    levels of rooms."""
    lines = ["company: Big Co", "max_concurrent: 8", "agents:"]

    def agent(aid: str, name: str, title: str, boss: str | None) -> None:
        lines.extend([f"  - id: {aid}", f"    name: {name}", f"    title: {title}"])
        if boss:
            lines.append(f"    reports_to: {boss}")

    agent("ceo", "Ada Chief", "Chief Executive Officer", None)
    n = 1
    for d in range(4):
        agent(f"dir{d}", f"Dana Director{d}", "Director", "ceo")
        n += 1
        for m in range(2):
            agent(f"mgr{d}{m}", f"Max Manager{d}{m}", "Manager", f"dir{d}")
            n += 1
            for e in range(6 if (d * 2 + m) < 7 else 5):
                agent(f"eng{d}{m}{e}", f"Eve Engineer{d}{m}{e}", "Engineer", f"mgr{d}{m}")
                n += 1
    assert n == 60, n
    path = folder / "company.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def gl_browser() -> Iterator[Any]:
    """Chromium with WebGL drawn in software (SwiftShader), as on a machine with no GPU."""
    sync_api.expect.set_options(timeout=60_000)  # a hang guard, as in conftest's browser
    reason = ensure_chromium()
    if reason:
        pytest.skip(reason)
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS + WEBGL_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def big_office(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    folder = tmp_path_factory.mktemp("big")
    running = start_office(folder, latency=1.0, org=big_company(folder / "chart"))
    yield running
    running.server.stop()


def open_page(browser: Any, office: Running, errors: list[str], **context: Any) -> Any:
    page = browser.new_context(viewport={"width": 1440, "height": 900}, **context).new_page()
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(office.url + "/")
    expect(page.locator("#conn")).to_have_text("live")
    return page


def floor3d(page: Any) -> dict[str, Any]:
    return page.evaluate("window.__office.floor3d()")


def wait_for_3d(page: Any, desks: int) -> None:
    page.wait_for_function(
        "(n) => window.__office.floor === '3d' && window.__office.floor3d()"
        " && Object.keys(window.__office.floor3d().desks).length === n",
        arg=desks,
    )


def drawn_colours(page: Any, path: Path) -> int:
    """How many distinct colours the canvas shows, read from a screenshot of it."""
    data = page.locator("#floor-3d canvas").screenshot(path=str(path), scale="css")
    _, _, pixels = png_pixels(data)
    return len(set(pixels))


def test_every_desk_of_a_60_agent_company_is_in_view_and_a_click_opens_its_task(
    gl_browser: Any, big_office: Running
) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    page = open_page(gl_browser, big_office, errors)
    wait_for_3d(page, 60)
    expect(page.locator("#floor-3d")).to_be_visible()
    expect(page.locator("#floor-2d")).to_be_hidden()

    # The canvas is drawn: rooms, desks and lights, not one flat colour.
    assert drawn_colours(page, ARTIFACTS / "office3d-idle-canvas.png") > 20

    # Fitted on load, every desk projects inside the canvas and the window.
    view = floor3d(page)
    assert view["camera"] == "fit"
    hidden = [d for d, v in view["desks"].items() if not v["visible"]]
    assert hidden == [], hidden

    # Give a goal and watch it travel down the chart.
    big_office.submit("Plan the company offsite")
    page.wait_for_function(
        "() => Object.values(window.__office.floor3d().desks)"
        ".filter((d) => d.state === 'working' || d.state === 'waiting').length >= 3"
    )
    page.wait_for_function(
        "() => Number(document.getElementById('floor-3d').dataset.delegations) >= 1"
    )
    page.screenshot(path=str(ARTIFACTS / "office3d-mid-run.png"), timeout=120_000)

    # Orbit away by dragging, then "Fit all" brings everyone back into view.
    box = page.locator("#floor-3d canvas").bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] - 30
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.mouse.move(cx + 400, cy - 150, steps=8)
    page.mouse.up()
    page.mouse.wheel(0, -1500)
    page.wait_for_function("() => window.__office.floor3d().camera === 'free'")
    expect(page.locator("#cam-fit")).to_have_attribute("aria-pressed", "false")
    page.locator("#cam-fit").click()
    expect(page.locator("#cam-fit")).to_have_attribute("aria-pressed", "true")
    page.wait_for_function(
        "() => window.__office.floor3d().settled"
        " && Object.values(window.__office.floor3d().desks).every((d) => d.visible)"
    )

    # A click on a desk where it is drawn (not under another desk's name tag) opens its task.
    target = page.evaluate(
        """() => {
          const view = window.__office.floor3d();
          const tasks = window.__office.summary().desks;
          for (const [id, d] of Object.entries(view.desks)) {
            const top = document.elementFromPoint(d.x, d.y);
            const clear = top && top.tagName === "CANVAS";
            if (tasks[id].task && clear) return { id, x: d.x, y: d.y, task: tasks[id].task };
          }
          return null;
        }"""
    )
    assert target, "no desk with a task is clear of labels"
    page.mouse.click(target["x"], target["y"])
    expect(page.locator("#drawer")).to_be_visible()
    expect(page.locator("#drawer-id")).to_contain_text(target["task"])
    assert floor3d(page)["picked"] == target["id"]
    page.screenshot(path=str(ARTIFACTS / "office3d-drawer.png"), timeout=120_000)
    page.keyboard.press("Escape")

    # "Follow the action" keeps the desks at work in view.
    page.locator("#cam-follow").click()
    expect(page.locator("#cam-follow")).to_have_attribute("aria-pressed", "true")
    assert errors == [], errors


def test_the_plan_under_reduced_motion_and_as_a_remembered_choice(
    gl_browser: Any, big_office: Running
) -> None:
    errors: list[str] = []
    page = open_page(gl_browser, big_office, errors, reduced_motion="reduce")
    expect(page.locator("#floor-2d .desk")).to_have_count(60)
    expect(page.locator("#floor-3d")).to_be_hidden()
    assert page.evaluate("window.__office.floor") == "2d"
    expect(page.locator("#floor-pick-2d")).to_have_attribute("aria-pressed", "true")

    # The person asks for 3D anyway: it shows, and stays chosen after a reload.
    page.locator("#floor-pick-3d").click()
    wait_for_3d(page, 60)
    page.reload()
    expect(page.locator("#conn")).to_have_text("live")
    wait_for_3d(page, 60)
    # And back to the plan, remembered too.
    page.locator("#floor-pick-2d").click()
    expect(page.locator("#floor-2d .desk")).to_have_count(60)
    page.reload()
    expect(page.locator("#floor-2d .desk")).to_have_count(60)
    assert page.evaluate("window.__office.floor") == "2d"
    assert errors == [], errors


def test_without_webgl_the_plan_shows_and_says_why(gl_browser: Any, office: Running) -> None:
    errors: list[str] = []
    page = gl_browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.add_init_script("HTMLCanvasElement.prototype.getContext = function () { return null; };")
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.goto(office.url + "/")
    expect(page.locator("#floor-2d .desk")).to_have_count(7)
    expect(page.locator("#floor-pick-3d")).to_be_disabled()
    expect(page.locator("#floor-note")).to_contain_text("WebGL")
    assert errors == [], errors
