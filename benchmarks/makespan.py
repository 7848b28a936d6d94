"""Makespan against the critical path: a CEO → 5 → 25 company, 50 ms of simulated thinking a turn.

The critical path is five turns long (CEO delegates, managers delegate, engineers deliver,
managers merge, CEO merges), so no schedule can finish faster than 5 × latency. Prints the
measured makespan divided by that bound, over several runs; 1.00 would be a perfect engine.
Then one more run, watched, and where its time went along its critical path: for each turn on
it, the wait from ready (delegated, or woken) to claimed, the session's set-up from claimed to
its first model call, and the model call plus what the turn did before it handed on.

    python benchmarks/makespan.py [--latency 0.05] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from firm import streams
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


@dataclass
class Turn:
    """One session of one task, with the times (seconds from submit) it passed each step."""

    task: str
    agent: str
    number: int
    ready: float  # delegated, created or woken
    claimed: float | None = None
    model: float | None = None  # its first model call (the brain's first words)
    settled: float | None = None


class Watch:
    """Times each turn's steps from the store's own events and the sessions' live text."""

    def __init__(self, store: Any):
        self.t0 = time.perf_counter()
        self.turns: dict[str, list[Turn]] = {}
        self.parent: dict[str, str] = {}
        self._stops = [store.subscribe(self._on_events), streams.listen(store, self._on_text)]

    def close(self) -> None:
        for stop in self._stops:
            stop()

    def _now(self) -> float:
        return time.perf_counter() - self.t0

    def _on_events(self, events: list[Any]) -> None:
        now = self._now()
        for e in events:
            turns = self.turns.get(e.task_id) if e.task_id else None
            if e.kind in ("created", "delegated"):
                self.turns[e.task_id] = [Turn(e.task_id, e.data.get("to") or e.agent, 0, now)]
                if e.kind == "delegated":
                    self.parent[e.task_id] = e.data["parent_id"]
            elif turns and e.kind == "woken":
                turns.append(Turn(e.task_id, turns[-1].agent, len(turns), now))
            elif turns and e.kind == "started":
                turns[-1].claimed = now
            elif turns and e.kind in ("waiting", "completed", "failed", "cancelled"):
                turns[-1].settled = now

    def _on_text(self, _agent: str, task_id: str, text: str) -> None:
        turns = self.turns.get(task_id)
        if turns and text and turns[-1].model is None:
            turns[-1].model = self._now()

    def critical_path(self, root_id: str) -> list[Turn]:
        """Back from the root's last turn: a merge waited for its last child to end; a first
        turn waited for the turn of its parent that delegated it."""
        path = [self.turns[root_id][-1]]
        while True:
            turn = path[-1]
            if turn.number > 0:
                kids = [self.turns[k][-1] for k, p in self.parent.items() if p == turn.task]
                path.append(max(kids, key=lambda t: t.settled or 0.0))
            elif turn.task in self.parent:
                path.append(self.turns[self.parent[turn.task]][0])
            else:
                return path[::-1]


def one_run(latency: float, watch: bool = False) -> tuple[float, Watch | None, str]:
    org = parse_org(company(), "<makespan>")
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "firm.db")
        engine = Engine(store, max_concurrent=25, heartbeat=0.5).start()
        watcher = Watch(store) if watch else None
        t0 = time.perf_counter()
        if watcher is not None:
            watcher.t0 = t0
        root = engine.submit(
            org, "Ship it", workspace=Path(tmp) / "ws", brain_options={"latency": latency}
        )
        done = engine.run_until(root.id)
        makespan = time.perf_counter() - t0
        if watcher is not None:
            watcher.close()
        engine.stop()
        store.close()
    assert done.status.value == "done"
    return makespan, watcher, root.id


def breakdown(watch: Watch, root_id: str, makespan: float, latency: float) -> None:
    path = watch.critical_path(root_id)
    ms = 1000.0
    print(
        f"one watched run: makespan {makespan * ms:.0f} ms; its critical path, turn by turn "
        f"(ms; 'model + acts' runs from the first model call to the hand-on: the next turn "
        f"ready, or the settle):"
    )
    print(
        f"  {'turn':<10} {'ready':>6} {'→claim':>7} {'→model':>7} {'model+acts':>11} {'hand-on':>8}"
    )
    totals = {"claim": 0.0, "setup": 0.0, "acts": 0.0}
    for i, turn in enumerate(path):
        nxt = path[i + 1] if i + 1 < len(path) else None
        handed = nxt.ready if nxt is not None and nxt.number == 0 else turn.settled
        claimed = turn.claimed or turn.ready
        model = turn.model or claimed
        handed = handed or model
        totals["claim"] += claimed - turn.ready
        totals["setup"] += model - claimed
        totals["acts"] += handed - model - latency
        print(
            f"  {turn.agent + ' #' + str(turn.number):<10} {turn.ready * ms:6.1f} "
            f"{(claimed - turn.ready) * ms:7.1f} {(model - claimed) * ms:7.1f} "
            f"{(handed - model) * ms:11.1f} {handed * ms:8.1f}"
        )
    n = len(path)
    print(
        f"  over {n} turns: waiting to be claimed {totals['claim'] * ms:.0f} ms, set-up to the "
        f"first model call {totals['setup'] * ms:.0f} ms, acting beyond the "
        f"{latency * ms:.0f} ms of the model {totals['acts'] * ms:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    bound = 5 * args.latency
    one_run(args.latency)  # warm up imports and caches
    cpu0 = time.process_time()
    spans = [one_run(args.latency)[0] for _ in range(args.runs)]
    cpu = (time.process_time() - cpu0) / args.runs  # steadier than wall time on a busy machine
    ratios = [s / bound for s in spans]
    print(
        f"makespan · CEO → 5 → 25 (31 tasks) · latency {args.latency * 1000:.0f} ms/turn · "
        f"max_concurrent 25 · {args.runs} runs"
    )
    print(f"critical-path bound: 5 turns × {args.latency * 1000:.0f} ms = {bound * 1000:.0f} ms")
    print(
        f"makespan ms: median {statistics.median(spans) * 1000:.0f}, "
        f"min {min(spans) * 1000:.0f}, max {max(spans) * 1000:.0f} · CPU {cpu * 1000:.0f} ms a run"
    )
    print(
        f"makespan / bound: median {statistics.median(ratios):.3f}, best {min(ratios):.3f}, "
        f"worst {max(ratios):.3f}  (aim: within 1.15)"
    )
    span, watch, root_id = one_run(args.latency, watch=True)
    assert watch is not None
    breakdown(watch, root_id, span, args.latency)


if __name__ == "__main__":
    main()
