"""Makespan against the critical path: a CEO → 5 → 25 company, 50 ms of simulated thinking a turn.

The critical path is five turns long (CEO delegates, managers delegate, engineers deliver,
managers merge, CEO merges), so no schedule can finish faster than 5 × latency. Prints the
measured makespan divided by that bound, over several runs; 1.00 would be a perfect engine.

    python benchmarks/makespan.py [--latency 0.05] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from firm.engine import Engine
from firm.org import parse_org
from firm.store import open_store


def company() -> str:
    lines = ["company: Makespan", "agents:"]
    lines.append("  - {id: ceo, name: C, title: Chief Executive Officer}")
    for i in range(5):
        lines.append(f"  - {{id: m{i}, name: M{i}, title: Engineering Manager, reports_to: ceo}}")
        for j in range(5):
            lines.append(
                f"  - {{id: e{i}{j}, name: E{i}{j}, title: Backend Engineer, reports_to: m{i}}}"
            )
    return "\n".join(lines) + "\n"


def one_run(latency: float) -> float:
    org = parse_org(company(), "<makespan>")
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "firm.db")
        engine = Engine(store, max_concurrent=25, heartbeat=0.5).start()
        t0 = time.perf_counter()
        root = engine.submit(
            org, "Ship it", workspace=Path(tmp) / "ws", brain_options={"latency": latency}
        )
        done = engine.run_until(root.id)
        makespan = time.perf_counter() - t0
        engine.stop()
        store.close()
    assert done.status.value == "done"
    return makespan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    bound = 5 * args.latency
    one_run(args.latency)  # warm up imports and caches
    spans = [one_run(args.latency) for _ in range(args.runs)]
    ratios = [s / bound for s in spans]
    print(
        f"makespan · CEO → 5 → 25 (31 tasks) · latency {args.latency * 1000:.0f} ms/turn · "
        f"max_concurrent 25 · {args.runs} runs"
    )
    print(f"critical-path bound: 5 turns × {args.latency * 1000:.0f} ms = {bound * 1000:.0f} ms")
    print(
        f"makespan ms: median {statistics.median(spans) * 1000:.0f}, "
        f"min {min(spans) * 1000:.0f}, max {max(spans) * 1000:.0f}"
    )
    print(
        f"makespan / bound: median {statistics.median(ratios):.3f}, best {min(ratios):.3f}, "
        f"worst {max(ratios):.3f}  (aim: within 1.15)"
    )


if __name__ == "__main__":
    main()
