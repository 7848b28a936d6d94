"""Where the makespan's time beyond its critical path goes, phase by phase, over several runs.

The company is makespan.py's (CEO → 5 → 25, `latency` of model time a turn). Each run is
timed from the store's own events; the overhead of a phase is its span less the model time
on it, so a perfect engine would print zeros:

    ceo start     submit → the CEO's session started
    ceo turn      the CEO's session → its delegations committed (waiting), less one model call
    managers      the CEO waiting → the last leaf started, less one model call (the managers'
                  set-up, their delegations, the leaves' claims)
    leaves        the last leaf started → the last manager woken, less one model call (the
                  leaves' set-up, tool calls and settles)
    merge         the last manager woken → the last manager done, less one model call
    ceo merge     the CEO woken → done, less one model call

Also the scheduler's claim transactions a run, and those that found nothing.

    python benchmarks/makespan_trace.py [--latency 0.05] [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from firm.engine import Engine
from firm.org import parse_org
from firm.store import open_store
from makespan import company

PHASES = ("ceo start", "ceo turn", "managers", "leaves", "merge", "ceo merge")


def traced_run(latency: float) -> tuple[float, dict[str, float], tuple[int, int], float]:
    """One run: its makespan, each phase's overhead (seconds), the scheduler's claims (all,
    empty) and the process's CPU time."""
    org = parse_org(company(), "<makespan>")
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "firm.db")
        engine = Engine(store, max_concurrent=25, heartbeat=0.5).start()
        seen: list[tuple[float, str, str]] = []

        def on_events(events: list[Any]) -> None:
            now = time.perf_counter()
            seen.extend((now, str(e.kind), e.agent or "") for e in events)

        stop = store.subscribe(on_events)
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        root = engine.submit(
            org, "Ship it", workspace=Path(tmp) / "ws", brain_options={"latency": latency}
        )
        engine.run_until(root.id)
        makespan = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        stop()
        engine.stop()
        store.close()

    def when(kind: str, agents: str, pick: Any = max) -> float:
        times = [t - t0 for t, k, a in seen if k == kind and a.startswith(agents)]
        return float(pick(times))

    ceo_started = when("started", "ceo", min)
    ceo_waiting = when("waiting", "ceo")
    leaves_started = when("started", "e")
    managers_woken = when("woken", "m")
    managers_done = when("completed", "m")
    ceo_woken = when("woken", "ceo")
    ceo_done = when("completed", "ceo")
    phases = {
        "ceo start": ceo_started,
        "ceo turn": ceo_waiting - ceo_started - latency,
        "managers": leaves_started - ceo_waiting - latency,
        "leaves": managers_woken - leaves_started - latency,
        "merge": managers_done - managers_woken - latency,
        "ceo merge": ceo_done - ceo_woken - latency,
    }
    return makespan, phases, (engine.claims, engine.empty_claims), cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    traced_run(args.latency)  # warm up imports and caches
    runs = [traced_run(args.latency) for _ in range(args.runs)]
    ms = 1000.0
    spans = [r[0] for r in runs]
    bound = 5 * args.latency
    print(
        f"makespan ms: median {statistics.median(spans) * ms:.0f}, min {min(spans) * ms:.0f}, "
        f"max {max(spans) * ms:.0f} · ratio median {statistics.median(spans) / bound:.3f}, "
        f"best {min(spans) / bound:.3f} · CPU "
        f"{statistics.median(r[3] for r in runs) * ms:.0f} ms a run (median)"
    )
    print("overhead beyond the model, ms (median [min–max] over the runs):")
    for phase in PHASES:
        values = [r[1][phase] * ms for r in runs]
        print(
            f"  {phase:<10} {statistics.median(values):6.1f}  [{min(values):.1f}–{max(values):.1f}]"
        )
    claims = [r[2] for r in runs]
    print(
        f"scheduler claims a run: {statistics.median(c[0] for c in claims):.0f}, of which "
        f"empty {statistics.median(c[1] for c in claims):.0f} (median)"
    )


if __name__ == "__main__":
    main()
