"""Replay figures: one goal of ~1,000 tasks, watched again in the office page at 60×.

Runs the goal on SQLite with the simulation brain (a generated company of --agents agents, a
CEO with nine reports and every other manager with ten; --sim-latency seconds a turn, so a
longer run gives a longer replay to watch), serves the office on loopback, and in headless
Chromium (Debian's /usr/bin/chromium) picks the run from the "Watching" list and plays it from
the start at 60×. Printed: the runs API and the run's events paged through the API; the time
to load the replay in the page; whether the page keeps the pace: the replay's clock runs at
60× the wall clock from play, each event is due at its place on that clock and is shown when
the frame that applied it has been produced, so each event's lag behind the clock (p50, p90,
p99, max), the wall time until the last event was shown (the pace kept), the frames shown and
those dropped at 60 Hz; the longest main-thread task and the time tasks blocked the thread
beyond 50 ms; what the 3D floor's own frames cost the thread; the JS heap at the end.

    python benchmarks/office_replay.py                       # ~1,000 agents, one task each
    python benchmarks/office_replay.py --sim-latency 2 --keep /tmp/replay-run   # a 155 s run
    python benchmarks/office_replay.py --keep /tmp/replay-run --floor 2d        # same run, plan
    python benchmarks/office_replay.py --trace /tmp/replay.json   # and a Chromium trace

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


def make_run(work: Path, agents: int, latency: float) -> tuple[Path, str, int]:
    org_path = work / "company.yaml"
    org_path.write_text(company(agents), encoding="utf-8")
    store = open_store(work / "firm.db")
    engine = Engine(store, max_concurrent=16, heartbeat=0.5)
    root = engine.submit(
        parse_org(org_path.read_text(), str(org_path)),
        "Grow the business",
        workspace=work / "workspace",
        brain_options={"latency": latency} if latency else None,
    )
    start = time.perf_counter()
    engine.run_until(root.id)
    wall = time.perf_counter() - start
    engine.stop()
    tasks = len(store.subtree(root.id))
    store.close()
    print(f"run: {tasks} tasks in {wall:.1f} s (simulation, {latency:g} s a turn)")
    return org_path, root.id, tasks


# Plays the run at 60× and measures whether the page keeps that pace. The replay's clock starts
# when play() is called and runs at 60× the wall clock; each event is due on the screen at its
# place on that clock. An event counts as shown when the frame that drew its batch is done: at
# the next frame's start (a frame begins only after the one before it was produced). Its lag is
# shown minus due, in wall milliseconds; the pace is the run's length over the wall time until
# its last event was shown.
PLAY = """async ({ root, speed, trace }) => {
  let longest = 0;
  let blocked = 0;
  new PerformanceObserver((l) => {
    for (const e of l.getEntries()) {
      longest = Math.max(longest, e.duration);
      blocked += Math.max(0, e.duration - 50);
    }
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
  document.getElementById("replay-speed").value = String(speed);
  document.getElementById("replay-speed").dispatchEvent(new Event("change"));
  // Settle: the rebuild at seek(0) is drawn before the clock starts.
  for (let i = 0; i < 3; i++) await new Promise((r) => requestAnimationFrame(r));
  const n = replay.events.length;
  const shownAt = new Float64Array(n).fill(-1);
  let pending = []; // [from, to, appliedAt]
  let applied = 0;
  const off = replay.listen(({ batch }) => {
    if (!batch.length) return;
    pending.push([replay.applied - batch.length, replay.applied, performance.now()]);
  });
  if (trace) console.timeStamp("replay-play");
  replay.play();
  const playStart = replay.lastTick;
  const frames = [];
  let last = performance.now();
  while (shownAt[n - 1] < 0) {
    const frameStart = await new Promise((r) => requestAnimationFrame(r));
    const now = performance.now();
    frames.push(now - last);
    last = now;
    const keep = [];
    for (const p of pending) {
      if (p[2] < frameStart) for (let i = p[0]; i < p[1]; i++) shownAt[i] = now;
      else keep.push(p);
    }
    pending = keep;
    if (now - playStart > 600000) break;
  }
  off();
  const lags = [];
  for (let i = 0; i < n; i++) {
    lags.push(shownAt[i] - (playStart + (replay.times[i] / speed) * 1000));
  }
  return {
    loaded, wall: (shownAt[n - 1] - playStart) / 1000, duration: replay.duration, events: n,
    frames, lags, longest, blocked,
    heap: performance.memory ? performance.memory.usedJSHeapSize : null,
    floor: window.__office.floor,
    desks: document.querySelectorAll(
      window.__office.floor === "3d" ? "#floor-3d .d3-desk" : "#floor-2d .desk").length,
    cost: window.__office.floor === "3d" ? window.__office.floor3d()?.cost ?? null : null,
  };
}"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--floor", choices=["3d", "2d"], default="3d")
    parser.add_argument("--speed", type=int, choices=[1, 4, 16, 60], default=60)
    parser.add_argument(
        "--sim-latency",
        type=float,
        default=0.0,
        help="seconds per simulated turn (a longer run gives a longer replay to watch)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="a directory to keep the run in and reuse on the next call (same --agents)",
    )
    parser.add_argument("--trace", type=Path, default=None, help="write a Chromium trace here")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if (work / "root.txt").exists():
            org_path, root = work / "company.yaml", (work / "root.txt").read_text().strip()
            print(f"run: reused from {work}")
        else:
            org_path, root, _tasks = make_run(work, args.agents, args.sim_latency)
            (work / "root.txt").write_text(root)
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
                if args.trace:
                    browser.start_tracing(
                        page=page,
                        path=str(args.trace),
                        categories=[
                            "devtools.timeline",
                            "disabled-by-default-devtools.timeline",
                            "disabled-by-default-devtools.timeline.frame",
                            "toplevel",
                            "blink",
                            "cc",
                            "gpu",
                            "viz",
                            "disabled-by-default-v8.cpu_profiler",
                        ],
                    )
                result = page.evaluate(
                    PLAY, {"root": root, "speed": args.speed, "trace": bool(args.trace)}
                )
                if args.trace:
                    browser.stop_tracing()
                browser.close()
        finally:
            server.stop()
    report(result, args.speed)


def report(result: dict, speed: int) -> None:
    frames = result["frames"] or [0.0]
    budget = 1000 / 60
    dropped = sum(max(0, round(f / budget) - 1) for f in frames)
    lags = [max(0.0, lag) for lag in result["lags"]]
    pace = result["duration"] / max(1e-9, result["wall"])
    print(
        f"page: {result['desks']} desks ({result['floor']} floor); replay of "
        f"{result['events']} events loaded in {result['loaded']:.0f} ms"
    )
    print(
        f"play at {speed}×: {result['duration']:.1f} s of run, shown to its last event in "
        f"{result['wall']:.2f} s wall (ideal {result['duration'] / speed:.2f} s) = {pace:.0f}× "
        f"kept"
    )
    print(
        f"lag of each event behind the {speed}× clock (wall ms): p50 {pct(lags, 0.5):.0f}, "
        f"p90 {pct(lags, 0.9):.0f}, p99 {pct(lags, 0.99):.0f}, max {max(lags):.0f} "
        f"(= {max(lags) * speed / 1000:.1f} s of run)"
    )
    print(
        f"frames shown: {len(frames)} ({len(frames) / max(1e-9, sum(frames) / 1000):.0f}/s; "
        f"p50 {pct(frames, 0.5):.0f} ms, p95 {pct(frames, 0.95):.0f} ms, max "
        f"{max(frames):.0f} ms); dropped at 60 Hz: {dropped}; longest main-thread task "
        f"{result['longest']:.0f} ms, {result['blocked']:.0f} ms blocked beyond 50 ms"
    )
    if result.get("cost"):
        cost = result["cost"]
        print(
            f"3D floor's own frame work: {cost['frames']} frames, "
            f"{cost['ms'] / max(1, cost['frames']):.1f} ms mean, {cost['max']:.0f} ms max"
        )
    if result["heap"]:
        print(f"JS heap at the end: {result['heap'] / 2**20:.0f} MiB")


if __name__ == "__main__":
    sys.exit(main())
