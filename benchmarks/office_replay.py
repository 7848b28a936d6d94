"""Replay figures: one goal of ~1,000 tasks, watched again in the office page at 60×.

Runs the goal on SQLite with the zero-latency simulation (a generated company of --agents
agents, a CEO with nine reports and every other manager with ten), serves the office on
loopback, and in headless Chromium (Debian's /usr/bin/chromium) picks the run from the
"Watching" list and plays it from the start at 60×. Printed: the runs API and the run's
events paged through the API; the time to load the replay in the page; the replay's pace
(run time covered per wall second, against the 60 asked for); frames per second and the
longest main-thread task while it plays; the JS heap at the end.

    python benchmarks/office_replay.py                 # ~1,000 agents, one task each
    python benchmarks/office_replay.py --agents 200
    python benchmarks/office_replay.py --floor 2d     # the plan instead of the 3D floor

Figures are for reading, not asserting.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx

from firm.engine import Engine
from firm.org import parse_org
from firm.server import AccessPolicy, Office, OfficeServer
from firm.store import open_store

TOKEN = "replay-benchmark"


def company(n: int) -> str:
    lines = ["company: Replay Co", "max_concurrent: 16", "agents:"]
    lines.append("  - {id: a0, name: A0, title: Chief Executive Officer}")
    made, queue = 1, [0]
    while made < n:
        boss = queue.pop(0)
        for _ in range(9 if boss == 0 else 10):
            if made >= n:
                break
            lines.append(
                f"  - {{id: a{made}, name: A{made}, title: Team Member, reports_to: a{boss}}}"
            )
            queue.append(made)
            made += 1
    return "\n".join(lines) + "\n"


def make_run(work: Path, agents: int) -> tuple[Path, str, int]:
    org_path = work / "company.yaml"
    org_path.write_text(company(agents), encoding="utf-8")
    store = open_store(work / "firm.db")
    engine = Engine(store, max_concurrent=16, heartbeat=0.5)
    root = engine.submit(
        parse_org(org_path.read_text(), str(org_path)),
        "Grow the business",
        workspace=work / "workspace",
    )
    start = time.perf_counter()
    engine.run_until(root.id)
    wall = time.perf_counter() - start
    engine.stop()
    tasks = len(store.subtree(root.id))
    store.close()
    print(f"run: {tasks} tasks in {wall:.1f} s (zero-latency simulation)")
    return org_path, root.id, tasks


PLAY = """async (root) => {
  const frames = [];
  let longest = 0;
  new PerformanceObserver((l) => {
    for (const e of l.getEntries()) longest = Math.max(longest, e.duration);
  }).observe({ type: "longtask", buffered: false });
  const picker = document.getElementById("run-pick");
  const loadStart = performance.now();
  picker.value = root;
  picker.dispatchEvent(new Event("change"));
  while (!window.__office.replay || window.__office.replay.runId !== root) {
    await new Promise((r) => setTimeout(r, 5));
  }
  const loaded = performance.now() - loadStart;
  const replay = window.__office.replay;
  replay.pause();
  replay.seek(0);
  document.getElementById("replay-speed").value = "60";
  document.getElementById("replay-speed").dispatchEvent(new Event("change"));
  const playStart = performance.now();
  replay.play();
  let last = performance.now();
  while (replay.t < replay.duration) {
    await new Promise((r) => requestAnimationFrame(r));
    const now = performance.now();
    frames.push(now - last);
    last = now;
  }
  const wall = (performance.now() - playStart) / 1000;
  return {
    loaded, wall, duration: replay.duration, events: replay.events.length, frames, longest,
    heap: performance.memory ? performance.memory.usedJSHeapSize : null,
    floor: window.__office.floor,
    desks: document.querySelectorAll(
      window.__office.floor === "3d" ? "#floor-3d .d3-desk" : "#floor-2d .desk").length,
  };
}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--floor", choices=["3d", "2d"], default="3d")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        org_path, root, _tasks = make_run(work, args.agents)
        office = Office(
            org_path,
            db=work / "firm.db",
            workspace=work / "workspace",
            policy=AccessPolicy(token=TOKEN, reads_need_token=False),
        )
        server = OfficeServer(office, "127.0.0.1", 0).start()
        try:
            with httpx.Client(base_url=server.url, timeout=60) as c:
                t0 = time.perf_counter()
                runs = c.get("/api/runs").json()["runs"]
                t1 = time.perf_counter()
                events, after, pages = 0, 0, 0
                while True:
                    page = c.get(
                        f"/api/runs/{root}/events", params={"after": after, "limit": 2000}
                    ).json()
                    events += len(page["events"])
                    after, pages = page["next_after"], pages + 1
                    if not page["more"]:
                        break
                t2 = time.perf_counter()
            print(
                f"GET /api/runs: {(t1 - t0) * 1000:.1f} ms ({len(runs)} run, "
                f"{runs[0]['tasks']} tasks counted); the run's {events} events in {pages} "
                f"pages of 2,000: {(t2 - t1) * 1000:.0f} ms"
            )
            with sync_playwright() as p:
                # The 3D floor drawn by SwiftShader (the page's default where WebGL runs), or
                # the plan, with WebGL turned off.
                gl = ["--use-angle=swiftshader", "--enable-unsafe-swiftshader"]
                browser = p.chromium.launch(
                    executable_path="/usr/bin/chromium",
                    args=["--no-sandbox", "--enable-precise-memory-info"]
                    + (gl if args.floor == "3d" else ["--disable-webgl"]),
                )
                page = browser.new_page(viewport={"width": 1440, "height": 900}, bypass_csp=True)
                page.goto(server.url + "/")
                page.wait_for_function(
                    "document.querySelectorAll('.desk, .d3-desk').length > 0", timeout=120_000
                )
                page.wait_for_function(
                    f"document.querySelector('#run-pick option[value=\"{root}\"]')",
                    timeout=60_000,
                )
                result = page.evaluate(PLAY, root)
                browser.close()
        finally:
            server.stop()
    frames = sorted(result["frames"]) or [0.0]
    fps = len(frames) / max(1e-9, sum(frames) / 1000)
    pace = result["duration"] / max(1e-9, result["wall"])
    print(
        f"page: {result['desks']} desks ({result['floor']} floor); replay of "
        f"{result['events']} events loaded in {result['loaded']:.0f} ms"
    )
    print(
        f"play at 60×: {result['duration']:.1f} s of run in {result['wall']:.1f} s wall "
        f"= {pace:.0f}× achieved; {fps:.0f} frames/s (p95 frame "
        f"{frames[int(len(frames) * 0.95) - 1 if len(frames) > 1 else 0]:.0f} ms); "
        f"longest main-thread task {result['longest']:.0f} ms"
    )
    if result["heap"]:
        print(f"JS heap at the end: {result['heap'] / 2**20:.0f} MiB")


if __name__ == "__main__":
    sys.exit(main())
