"""Engine throughput: one goal through a generated 1 → 10 → 100 → 1,000 company, then 10× leaves.

Prints tasks/s, wall time per task, the engine's own overhead per task (wall time minus the
brain's own work, i.e. writing deliverables: the files' writes and the folders and ready-made
files a manager prepares for its team's), CPU time per task (the steadier figure on a shared
machine), SQL statements per task and peak RSS. The simulation brain runs with zero
latency, so what is measured is the engine and the store.

    python benchmarks/engine_throughput.py [--max-concurrent 4] [--quick]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import event

from firm.engine import Engine
from firm.org import parse_org
from firm.store import open_store
from firm.tools import workspace as workspace_module


def generated_org(fanouts: list[int]) -> str:
    """A tree: one CEO, then each level's managers have fanouts[i] reports each."""
    lines = [
        "company: Generated",
        "agents:",
        "  - {id: a, name: A, title: Chief Executive Officer}",
    ]
    level = ["a"]
    for depth, fanout in enumerate(fanouts):
        nxt = []
        leaf = depth == len(fanouts) - 1
        title = "Backend Engineer" if leaf else "Engineering Manager"
        for boss in level:
            for i in range(fanout):
                aid = f"{boss}-{i}"
                lines.append(f"  - {{id: {aid}, name: {aid}, title: {title}, reports_to: {boss}}}")
                nxt.append(aid)
        level = nxt
    return "\n".join(lines) + "\n"


class WriteTimer:
    """Time spent writing deliverables: the brain's own work, not the engine's. A simulated
    manager makes its team's folder and a new file ready for each report before they write
    (`Workspace.make_folder`), so the files' inodes are made there, not in the writes: both
    count, or moving that work would move it into the engine's figure."""

    TIMED = ("write", "make_folder")

    def __init__(self) -> None:
        self.seconds = 0.0
        self.lock = threading.Lock()
        self._originals = {name: getattr(workspace_module.Workspace, name) for name in self.TIMED}

    def __enter__(self) -> WriteTimer:
        for name, original in self._originals.items():
            setattr(workspace_module.Workspace, name, self._timed(original))
        return self

    def _timed(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                with self.lock:
                    self.seconds += time.perf_counter() - t0

        return timed

    def __exit__(self, *exc: object) -> None:
        for name, original in self._originals.items():
            setattr(workspace_module.Workspace, name, original)


def measure(fanouts: list[int], max_concurrent: int) -> dict[str, float]:
    org = parse_org(generated_org(fanouts), "<generated>")
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "firm.db")
        statements = 0

        def count(*_a: object) -> None:
            nonlocal statements
            statements += 1

        event.listen(store.engine, "before_cursor_execute", count)
        with WriteTimer() as writes:
            engine = Engine(store, max_concurrent=max_concurrent, heartbeat=0.5)
            cpu0 = time.process_time()
            t0 = time.perf_counter()
            root = engine.submit(org, "Ship the product", workspace=Path(tmp) / "ws")
            done = engine.run_until(root.id)
            wall = time.perf_counter() - t0
            cpu = time.process_time() - cpu0
            engine.stop()
        n = len(store.subtree(root.id))
        assert done.status.value == "done", done
        store.close()
    return {
        "agents": len(org.agents),
        "tasks": n,
        "wall_s": wall,
        "tasks_per_s": n / wall,
        "ms_per_task": wall / n * 1000,
        "overhead_ms_per_task": (wall - writes.seconds / max_concurrent) / n * 1000,
        "write_ms_per_task": writes.seconds / n * 1000,
        "cpu_ms_per_task": cpu / n * 1000,
        "sql_per_task": statements / n,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-concurrent", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="Skip the 10× run.")
    args = parser.parse_args()
    shapes = [("1 → 10 → 100 → 1,000", [10, 10, 10])]
    if not args.quick:
        shapes.append(("1 → 10 → 100 → 10,000 (10× leaves)", [10, 10, 100]))
    print(
        f"engine_throughput · simulation brain, zero latency · max_concurrent "
        f"{args.max_concurrent} · Python {sys.version.split()[0]}"
    )
    header = (
        f"{'company':<36} {'tasks':>7} {'wall s':>8} {'tasks/s':>8} {'ms/task':>8} "
        f"{'engine ms/task':>15} {'CPU ms/task':>12} {'SQL/task':>9} {'peak RSS MB':>12}"
    )
    print(header)
    print("-" * len(header))
    results = []
    for label, fanouts in shapes:
        r = measure(fanouts, args.max_concurrent)
        results.append(r)
        print(
            f"{label:<36} {r['tasks']:>7.0f} {r['wall_s']:>8.2f} {r['tasks_per_s']:>8.0f} "
            f"{r['ms_per_task']:>8.3f} {r['overhead_ms_per_task']:>15.3f} "
            f"{r['cpu_ms_per_task']:>12.3f} {r['sql_per_task']:>9.1f} {r['peak_rss_mb']:>12.0f}"
        )
    if len(results) == 2:
        a, b = results
        print(
            f"growth: {b['tasks'] / a['tasks']:.1f}× tasks took {b['wall_s'] / a['wall_s']:.1f}× "
            f"the time (linear = same ratio); ms/task {a['ms_per_task']:.3f} → "
            f"{b['ms_per_task']:.3f}"
        )


if __name__ == "__main__":
    main()
