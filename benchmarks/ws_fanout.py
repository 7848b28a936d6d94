"""Fan-out of the office's live feed: many WebSocket watchers while hundreds of tasks run.

Starts `firm serve` in its own process (a fresh SQLite store, the simulation brain), connects
the watchers, gives the company enough goals to make the task count, and checks that every
watcher received every event of the log, in order, with no gap and no repeat — the same
sequence GET /api/events returns. Prints the fan-out latency: from an event's timestamp (taken
when its transaction began) to its arrival at a watcher.

    python benchmarks/ws_fanout.py                  # 50 watchers, 500 tasks
    python benchmarks/ws_fanout.py --watchers 200 --tasks 2000 --sim-latency 0.05

Everything is on loopback; the run is bounded by --timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from websockets.asyncio.client import connect

TOKEN = "fanout-benchmark"


def org_yaml(managers: int, reports: int, max_concurrent: int) -> str:
    lines = [
        "company: Fan-out Inc",
        f"max_concurrent: {max_concurrent}",
        "agents:",
        "  - {id: ceo, name: Chief, title: Chief Executive Officer}",
    ]
    for m in range(managers):
        lines.append(
            f"  - {{id: m{m}, name: Manager {m}, title: Engineering Manager, reports_to: ceo}}"
        )
        for r in range(reports):
            lines.append(
                f"  - {{id: m{m}-r{r}, name: Engineer {m}.{r}, title: Backend Engineer, "
                f"reports_to: m{m}}}"
            )
    return "\n".join(lines) + "\n"


@dataclass
class Watcher:
    name: int
    start_seq: int = 0
    seqs: list[int] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)


async def watch(url: str, w: Watcher, ready: asyncio.Event, until: asyncio.Future[int]) -> None:
    async with connect(
        url.replace("http://", "ws://") + "/api/ws", max_size=None, open_timeout=30
    ) as ws:
        snapshot = json.loads(await ws.recv())
        w.start_seq = snapshot["seq"]
        ready.set()
        while True:
            if until.done() and w.seqs and w.seqs[-1] >= until.result():
                return
            try:
                raw = await asyncio.wait_for(ws.recv(), timeout=1.0)
            except TimeoutError:
                continue
            now = time.time()
            for event in json.loads(raw)["events"]:
                w.seqs.append(event["seq"])
                w.lags.append(now - event["ts"])
                if w.name == 0:
                    w.events.append(event)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def run(args: argparse.Namespace, url: str) -> int:
    per_goal = 1 + args.managers * (1 + args.reports)
    goals = max(1, -(-args.tasks // per_goal))
    watchers = [Watcher(i) for i in range(args.watchers)]
    until: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    readies = [asyncio.Event() for _ in watchers]
    tasks = [
        asyncio.create_task(watch(url, w, ready, until))
        for w, ready in zip(watchers, readies, strict=True)
    ]
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)
    print(f"{len(watchers)} watchers connected; giving {goals} goals × {per_goal} tasks")

    headers = {"Authorization": f"Bearer {TOKEN}"}
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
        roots = []
        for i in range(goals):
            r = await http.post("/api/tasks", json={"goal": f"Ship feature {i}"})
            r.raise_for_status()
            roots.append(r.json()["id"])
        deadline = time.monotonic() + args.timeout
        while True:
            states = [(await http.get(f"/api/tasks/{root}")).json() for root in roots]
            if all(s["status"] in ("done", "failed", "cancelled") for s in states):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"the goals did not finish within {args.timeout}s")
            await asyncio.sleep(0.25)
        worked = time.monotonic() - started
        total_tasks = sum(1 + len(s["subtree"]) for s in states)
        final = (await http.get("/api/events", params={"after": 10**12})).json()["last_seq"]
        until.set_result(final)
        await asyncio.wait_for(asyncio.gather(*tasks), args.timeout)
        # The log itself, to compare with what the watchers saw.
        log, after = [], watchers[0].start_seq
        while after < final:
            page = (await http.get("/api/events", params={"after": after, "limit": 1000})).json()
            log += page["events"]
            after = page["next_after"]

    problems = 0
    for w in watchers:
        expected = list(range(w.start_seq + 1, final + 1))
        if w.seqs[: len(expected)] != expected:
            problems += 1
            missing = sorted(set(expected) - set(w.seqs))[:5]
            print(f"watcher {w.name}: out of order or incomplete (missing e.g. {missing})")
    if watchers[0].events[: len(log)] != log:
        problems += 1
        print("watcher 0 saw events that differ from GET /api/events")

    lags = [lag for w in watchers for lag in w.lags]
    events = final - watchers[0].start_seq
    print(
        f"tasks run:            {total_tasks} in {worked:.1f}s ({events} events, "
        f"{events / worked:.0f} events/s)"
    )
    print(f"deliveries:           {len(lags)} ({len(watchers)} watchers × {events} events)")
    print(f"in order, complete:   {len(watchers) - problems}/{len(watchers)} watchers")
    print(
        "fan-out latency (ms): "
        f"median {statistics.median(lags) * 1000:.1f} · p90 {percentile(lags, 90) * 1000:.1f} · "
        f"p99 {percentile(lags, 99) * 1000:.1f} · max {max(lags) * 1000:.1f}"
    )
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watchers", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--managers", type=int, default=4)
    parser.add_argument("--reports", type=int, default=5)
    parser.add_argument("--max-concurrent", type=int, default=8)
    parser.add_argument("--sim-latency", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="firm-fanout-") as tmp:
        folder = Path(tmp)
        (folder / "company.yaml").write_text(
            org_yaml(args.managers, args.reports, args.max_concurrent), encoding="utf-8"
        )
        command = [sys.executable, "-m", "firm", "serve", "company.yaml", "--port", "0"]
        if args.sim_latency:
            command += ["--sim-latency", str(args.sim_latency)]
        server = subprocess.Popen(
            command,
            cwd=folder,
            env={**os.environ, "FIRM_TOKEN": TOKEN, "FIRM_DB": str(folder / "firm.db")},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert server.stdout is not None
            url = None
            for line in server.stdout:
                found = re.search(r"open at (http://\S+)", line)
                if found:
                    url = found.group(1)
                    break
            if url is None:
                raise SystemExit("firm serve did not start")
            # Keep reading its output, so a full pipe can never stall the server.
            threading.Thread(target=server.stdout.read, daemon=True).start()
            return asyncio.run(run(args, url))
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()


if __name__ == "__main__":
    sys.exit(main())
