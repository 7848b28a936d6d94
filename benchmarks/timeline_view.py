"""Timeline figures: the office's Timeline view on one big goal, in headless Chromium.

Runs a goal on SQLite with the zero-latency simulation (a generated company of --agents agents,
a CEO with nine reports and every other manager with ten, one task each at least), serves the
office on loopback, and in Debian's /usr/bin/chromium opens the Timeline on the run's replay.
Printed: the time to read the run into sessions and walk its critical path (sessions.js and
critical_path.js, in the page); playing the replay at 60× with the Timeline showing (pace,
frames per second, longest main-thread task); the view at the run's end (bars in the page
against sessions in the run: only the rows in view are drawn); scrolling from top to bottom
(frames per second); the JS heap.

    python benchmarks/timeline_view.py                # 200 agents
    python benchmarks/timeline_view.py --agents 1000

Figures are for reading, not asserting.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from firm.engine import Engine
from firm.org import parse_org
from firm.server import AccessPolicy, Office, OfficeServer
from firm.store import open_store

TOKEN = "timeline-benchmark"


def company(n: int) -> str:
    lines = ["company: Timeline Co", "max_concurrent: 16", "agents:"]
    lines.append("  - {id: a0, name: Agent 0, title: Chief Executive Officer}")
    made, queue = 1, [0]
    while made < n:
        boss = queue.pop(0)
        for _ in range(9 if boss == 0 else 10):
            if made >= n:
                break
            lines.append(
                f"  - {{id: a{made}, name: Agent {made}, title: Team Member, reports_to: a{boss}}}"
            )
            queue.append(made)
            made += 1
    return "\n".join(lines) + "\n"


def make_run(work: Path, agents: int) -> tuple[Path, str]:
    org_path = work / "company.yaml"
    org_path.write_text(company(agents), encoding="utf-8")
    store = open_store(work / "firm.db")
    engine = Engine(store, max_concurrent=16, heartbeat=0.5)
    org = parse_org(org_path.read_text(), str(org_path))
    root = engine.submit(org, "Grow the business", workspace=work / "workspace")
    start = time.perf_counter()
    engine.run_until(root.id)
    wall = time.perf_counter() - start
    engine.stop()
    print(f"run: {len(store.subtree(root.id))} tasks in {wall:.1f} s (zero-latency simulation)")
    store.close()
    return org_path, root.id


MEASURE = """async (root) => {
  let longest = 0;
  new PerformanceObserver((l) => {
    for (const e of l.getEntries()) longest = Math.max(longest, e.duration);
  }).observe({ type: "longtask", buffered: false });
  const frame = () => new Promise((r) => requestAnimationFrame(r));
  const picker = document.getElementById("run-pick");
  picker.value = root;
  picker.dispatchEvent(new Event("change"));
  while (!window.__office.replay || window.__office.replay.runId !== root) {
    await new Promise((r) => setTimeout(r, 5));
  }
  const replay = window.__office.replay;
  replay.pause();
  document.getElementById("tab-timeline").click();

  // The pure part: the run's events into sessions, and the critical path.
  const { buildSessions } = await import("/sessions.js");
  const { criticalPath } = await import("/critical_path.js");
  let t = performance.now();
  const rounds = 5;
  let model = null;
  for (let i = 0; i < rounds; i++) {
    model = buildSessions(replay.events);
    criticalPath(model);
  }
  const compute = (performance.now() - t) / rounds;

  // Play at 60× with the timeline showing.
  replay.seek(0);
  document.getElementById("replay-speed").value = "60";
  document.getElementById("replay-speed").dispatchEvent(new Event("change"));
  await frame();
  longest = 0;
  const frames = [];
  const playStart = performance.now();
  replay.play();
  let last = performance.now();
  while (replay.t < replay.duration) {
    await frame();
    const now = performance.now();
    frames.push(now - last);
    last = now;
  }
  const wall = (performance.now() - playStart) / 1000;
  const playLongest = longest;

  // The end: everything drawn once, then a scroll from top to bottom.
  await frame();
  await frame();
  const bars = document.querySelectorAll(".tl-bar").length;
  const rows = Number(document.getElementById("view-timeline").dataset.agents);
  const box = document.querySelector(".tl-frame");
  longest = 0;
  const scrollFrames = [];
  last = performance.now();
  const steps = 60;
  for (let i = 1; i <= steps; i++) {
    box.scrollTop = ((box.scrollHeight - box.clientHeight) * i) / steps;
    await frame();
    const now = performance.now();
    scrollFrames.push(now - last);
    last = now;
  }
  return {
    compute, events: replay.events.length, sessions: model.sessions.length,
    waits: model.waits.length, links: model.links.length,
    duration: replay.duration, wall, frames, playLongest,
    bars, rows, scrollFrames, scrollLongest: longest,
    heap: performance.memory ? performance.memory.usedJSHeapSize : null,
  };
}"""


def fps(frames: list[float]) -> float:
    return len(frames) / max(1e-9, sum(frames) / 1000)


def p95(frames: list[float]) -> float:
    ordered = sorted(frames) or [0.0]
    return ordered[max(0, int(len(ordered) * 0.95) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=200)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        org_path, root = make_run(work, args.agents)
        office = Office(
            org_path,
            db=work / "firm.db",
            workspace=work / "workspace",
            policy=AccessPolicy(token=TOKEN, reads_need_token=False),
        )
        server = OfficeServer(office, "127.0.0.1", 0).start()
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path="/usr/bin/chromium",
                    args=["--no-sandbox", "--enable-precise-memory-info", "--disable-webgl"],
                )
                page = browser.new_page(viewport={"width": 1440, "height": 900}, bypass_csp=True)
                page.goto(server.url + "/")
                page.wait_for_function(
                    f"document.querySelector('#run-pick option[value=\"{root}\"]')",
                    timeout=120_000,
                )
                r = page.evaluate(MEASURE, root)
                browser.close()
        finally:
            server.stop()
    print(
        f"sessions.js + critical_path.js on {r['events']} events: {r['compute']:.1f} ms "
        f"({r['sessions']} sessions, {r['waits']} waits, {r['links']} links)"
    )
    print(
        f"replay at 60× on the Timeline: {r['duration']:.1f} s of run in {r['wall']:.1f} s "
        f"= {r['duration'] / max(1e-9, r['wall']):.0f}× achieved; {fps(r['frames']):.0f} "
        f"frames/s (p95 frame {p95(r['frames']):.0f} ms); longest main-thread task "
        f"{r['playLongest']:.0f} ms"
    )
    print(
        f"at the end: {r['rows']} rows, {r['bars']} bars in the page of "
        f"{r['sessions'] + r['waits']} (only rows in view are drawn); scrolling top to "
        f"bottom {fps(r['scrollFrames']):.0f} frames/s (p95 frame {p95(r['scrollFrames']):.0f} "
        f"ms), longest task {r['scrollLongest']:.0f} ms"
    )
    if r["heap"]:
        print(f"JS heap at the end: {r['heap'] / 2**20:.0f} MiB")


if __name__ == "__main__":
    sys.exit(main())
