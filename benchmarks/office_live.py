"""Live office figures: a 200-agent, 5-level company with 4 goals at once, watched in Chromium.

Starts `firm serve` in its own process (the engine runs there, on a fresh SQLite store, with
the simulation brain at --sim-latency seconds a turn), opens the office in headless Chromium
(Debian's /usr/bin/chromium; the 3D floor drawn by SwiftShader, or the plan with --floor 2d),
gives the CEO four goals at once and watches them to the end. Printed, for the time the goals
run: frames per second and the slowest frames; the longest main-thread task (PerformanceObserver
"longtask") and the total time tasks blocked the thread beyond 50 ms; what the 3D floor's frames
cost the page's thread; the time from the engine's last ending event to the page showing the
final state (every count final, no desk busy); the JS heap.

    python benchmarks/office_live.py                    # 3D floor, 0.05 s a turn
    python benchmarks/office_live.py --floor 2d --sim-latency 0.2

Figures are for reading, not asserting. Everything is on loopback.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

TOKEN = "live-benchmark"
ENDINGS = ("completed", "failed", "cancelled")


def company(max_concurrent: int) -> str:
    """200 agents on 5 levels: a CEO, 3 VPs, 9 directors, 27 managers, 160 engineers."""
    lines = ["company: Live Bench Co", f"max_concurrent: {max_concurrent}", "agents:"]
    lines.append("  - {id: ceo, name: Chief, title: Chief Executive Officer}")
    levels = [["ceo"]]
    titles = ["Vice President", "Director", "Engineering Manager"]
    for depth, title in enumerate(titles, start=1):
        level = []
        for boss in levels[-1]:
            for i in range(3):
                aid = f"{boss}-{i}" if boss != "ceo" else f"l{depth}-{i}"
                lines.append(
                    f"  - {{id: {aid}, name: {title} {aid}, title: {title}, reports_to: {boss}}}"
                )
                level.append(aid)
        levels.append(level)
    engineers = 200 - sum(len(level) for level in levels)
    for n in range(engineers):
        boss = levels[-1][n % len(levels[-1])]
        lines.append(
            f"  - {{id: e{n}, name: Engineer {n}, title: Backend Engineer, reports_to: {boss}}}"
        )
    return "\n".join(lines) + "\n"


# Installed in the page before the goals are given: frames, long tasks, the heap, and every
# change of what the page shows (the status counts and the number of busy desks), timestamped
# on the wall clock the engine's events use.
WATCH = """() => {
  const m = { frames: [], longtasks: [], heap: [], shown: [], stop: false };
  window.__bench = m;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) m.longtasks.push(e.duration);
  }).observe({ type: "longtask", buffered: false });
  let last = performance.now();
  const loop = (now) => {
    m.frames.push(now - last);
    last = now;
    if (!m.stop) requestAnimationFrame(loop);
  };
  requestAnimationFrame(loop);
  const busy = '.d3-desk[data-state="working"], .d3-desk[data-state="waiting"],'
    + ' .desk[data-state="working"], .desk[data-state="waiting"]';
  const look = () => {
    const at = Date.now() / 1000;
    const stats = document.getElementById("stats").textContent;
    const desks = document.querySelectorAll(busy).length;
    const prev = m.shown[m.shown.length - 1];
    if (!prev || prev.stats !== stats || prev.desks !== desks) m.shown.push({ at, stats, desks });
  };
  const seen = new MutationObserver(look);
  const text = { childList: true, subtree: true, characterData: true };
  seen.observe(document.getElementById("stats"), text);
  for (const id of ["floor-3d", "floor-2d"]) {
    const states = { attributes: true, subtree: true, attributeFilter: ["data-state"] };
    seen.observe(document.getElementById(id), states);
  }
  m.heapTimer = setInterval(() => {
    if (performance.memory) m.heap.push(performance.memory.usedJSHeapSize);
  }, 250);
}"""

STOP = """() => {
  const m = window.__bench;
  m.stop = true;
  clearInterval(m.heapTimer);
  const three = window.__office.floor3d();
  return {
    frames: m.frames, longtasks: m.longtasks, heap: m.heap, shown: m.shown,
    cost: three ? three.cost : null, floor: window.__office.floor,
    desks: document.querySelectorAll(
      window.__office.floor === "3d" ? "#floor-3d .d3-desk" : "#floor-2d .desk").length,
  };
}"""


def counts(stats: str) -> dict[str, int]:
    return {label: int(n) for n, label in re.findall(r"(\d+) ([a-z ]+?)(?=\d|$)", stats)}


def serve(folder: Path, args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "firm", "serve", "company.yaml", "--port", "0"]
    command += ["--sim-latency", str(args.sim_latency)]
    server = subprocess.Popen(
        command,
        cwd=folder,
        env={**os.environ, "FIRM_TOKEN": TOKEN, "FIRM_DB": str(folder / "firm.db")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert server.stdout is not None
    for line in server.stdout:
        found = re.search(r"open at (http://\S+)", line)
        if found:
            # Keep reading its output, so a full pipe can never stall the server.
            threading.Thread(target=server.stdout.read, daemon=True).start()
            return server, found.group(1)
    raise SystemExit("firm serve did not start")


def watch(url: str, args: argparse.Namespace) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    flags = ["--no-sandbox", "--enable-precise-memory-info"]
    if args.floor == "3d":
        flags += ["--use-angle=swiftshader", "--enable-unsafe-swiftshader"]
    else:
        flags += ["--disable-webgl"]
    with sync_playwright() as p, httpx.Client(base_url=url, timeout=60) as http:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=flags)
        page = browser.new_page(viewport={"width": 1440, "height": 900}, bypass_csp=True)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}/#token={TOKEN}")
        page.wait_for_function(
            "document.getElementById('conn').dataset.state === 'live'"
            " && document.querySelectorAll('.d3-desk, .desk').length >= 200",
            timeout=180_000,
        )
        page.evaluate(WATCH)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        started = time.time()
        roots = []
        for i in range(4):
            r = http.post("/api/tasks", json={"goal": f"Goal {i + 1}: ship"}, headers=headers)
            r.raise_for_status()
            roots.append(r.json()["id"])
        deadline = time.monotonic() + args.timeout
        while True:
            states = [http.get(f"/api/tasks/{root}").json() for root in roots]
            if all(s["status"] in ("done", "failed", "cancelled") for s in states):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"the goals did not finish within {args.timeout}s")
            time.sleep(0.25)
        tasks = sum(1 + len(s["subtree"]) for s in states)
        last_seq = http.get("/api/events", params={"after": 10**12}).json()["last_seq"]
        tail = http.get(
            "/api/events", params={"after": max(0, last_seq - 200), "limit": 200}
        ).json()["events"]
        last_end = max(e["ts"] for e in tail if e["kind"] in ENDINGS)
        # Wait (bounded) for the page to show the end, then stop watching.
        try:
            page.wait_for_function(
                "() => window.__bench.shown.length && window.__bench.shown.at(-1).desks === 0"
                " && /^0 /.test(document.querySelector('#stats .s-in_progress').textContent)"
                " && /^0 /.test(document.querySelector('#stats .s-todo').textContent)"
                " && /^0 /.test(document.querySelector('#stats .s-waiting').textContent)",
                timeout=120_000,
            )
        except Exception:
            shown = page.evaluate("window.__bench.shown.at(-1)")
            raise SystemExit(
                f"the page never showed the end within 120 s: it shows {shown}"
            ) from None
        page.wait_for_timeout(300)
        result = page.evaluate(STOP)
        browser.close()
    result.update(tasks=tasks, started=started, last_end=last_end, errors=errors)
    return result


def report(r: dict[str, Any], args: argparse.Namespace) -> None:
    frames = sorted(r["frames"]) or [0.0]
    wall = sum(r["frames"]) / 1000
    final = None
    for s in r["shown"]:
        c = counts(s["stats"])
        idle = s["desks"] == 0 and not (c.get("working") or c.get("waiting") or c.get("to do"))
        ended = c.get("done", 0) + c.get("failed", 0) + c.get("cancelled", 0)
        if idle and ended >= r["tasks"]:
            final = s["at"]
            break
    longest = max(r["longtasks"], default=0.0)
    blocking = sum(max(0.0, d - 50) for d in r["longtasks"])
    print(
        f"company: 200 agents on 5 levels; 4 goals at once, {r['tasks']} tasks, "
        f"{args.sim_latency} s a turn; floor {r['floor']} ({r['desks']} desks)"
    )
    print(
        f"run: goals given → last ending event {r['last_end'] - r['started']:.1f} s; "
        f"watched for {wall:.1f} s"
    )
    print(
        f"frames: {len(frames) / max(wall, 1e-9):.1f} per second; median "
        f"{frames[len(frames) // 2]:.0f} ms, p95 {frames[int(len(frames) * 0.95)]:.0f} ms, "
        f"slowest {frames[-1]:.0f} ms"
    )
    print(
        f"main thread: longest task {longest:.0f} ms; {len(r['longtasks'])} tasks over 50 ms, "
        f"blocking {blocking / 1000:.1f} s in all"
    )
    if r["cost"] and r["cost"]["frames"]:
        c = r["cost"]
        print(
            f"3D frames: {c['frames']} drawn, {c['ms'] / c['frames']:.1f} ms each on average "
            f"(the page's thread), slowest {c['max']:.0f} ms"
        )
    if final is None:
        print("final state: not seen in the page")
    else:
        lag = (final - r["last_end"]) * 1000
        print(f"engine's last ending event → page shows the final state: {lag:.0f} ms")
    if r["heap"]:
        most, end = max(r["heap"]) / 2**20, r["heap"][-1] / 2**20
        print(f"JS heap: {most:.0f} MiB at most, {end:.0f} MiB at the end")
    for e in r["errors"][:5]:
        print("page error:", e)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--floor", choices=["3d", "2d"], default="3d")
    parser.add_argument("--sim-latency", type=float, default=0.05)
    parser.add_argument("--max-concurrent", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="firm-office-live-") as tmp:
        folder = Path(tmp)
        (folder / "company.yaml").write_text(company(args.max_concurrent), encoding="utf-8")
        server, url = serve(folder, args)
        try:
            result = watch(url, args)
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
    report(result, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
