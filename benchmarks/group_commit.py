"""Group commit: the throughput benchmark's company with concurrent sessions' writes sharing
one transaction, against one transaction per write, on SQLite and on a durable PostgreSQL.

For each store and each setting it prints write transactions per task, commits per task and per
second, writes per commit, wall ms per task and CPU ms per task. The PostgreSQL server is started
the way the tests start one, but durable (fsync and synchronous_commit on), since one fsync per
group instead of one per write is the point there.

    python benchmarks/group_commit.py [--max-concurrent 4] [--fanouts 10,10,10] [--rounds 2]
        [--skip-pg] [--skip-sqlite]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from firm.chain import entry_hash
from firm.engine import Engine
from firm.org import parse_org
from firm.store import open_store

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "tests" / "postgres"))
from engine_throughput import generated_org  # noqa: E402


def check_chain(store) -> None:  # type: ignore[no-untyped-def]
    """Every entry follows the one before it: seq without a gap, hashes linked."""
    prev, seq = "0" * 64, 0
    while batch := store.events_after(seq, limit=5000):
        for e in batch:
            assert e.seq == seq + 1, f"gap before seq {e.seq}"
            assert e.prev_hash == prev or seq == 0, f"chain broken at seq {e.seq}"
            h = entry_hash(e.prev_hash, e.seq, e.ts, e.kind, e.task_id, e.agent, e.data)
            assert h == e.hash, f"hash of seq {e.seq} is wrong"
            prev, seq = e.hash, e.seq


def measure(url: str, fanouts: list[int], max_concurrent: int, grouped: bool, work: Path) -> dict:
    org = parse_org(generated_org(fanouts), "<generated>")
    store = open_store(url)
    store.group_commit = grouped
    engine = Engine(store, max_concurrent=max_concurrent, heartbeat=0.5)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    root = engine.submit(org, "Ship the product", workspace=work / "ws")
    done = engine.run_until(root.id)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    engine.stop()
    assert done.status.value == "done", done
    n = len(store.subtree(root.id))
    writes, commits = store._group.writes, store._group.commits
    check_chain(store)
    store.close()
    return {
        "tasks": n,
        "writes_per_task": writes / n,
        "commits_per_task": commits / n,
        "commits_per_s": commits / wall,
        "writes_per_commit": writes / commits,
        "ms_per_task": wall / n * 1000,
        "cpu_ms_per_task": cpu / n * 1000,
    }


def show(label: str, r: dict) -> None:
    print(
        f"{label:<28} {r['tasks']:>6} {r['writes_per_task']:>9.2f} {r['commits_per_task']:>10.2f} "
        f"{r['writes_per_commit']:>9.2f} {r['commits_per_s']:>10.0f} {r['ms_per_task']:>8.3f} "
        f"{r['cpu_ms_per_task']:>8.3f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-concurrent", type=int, default=4)
    parser.add_argument("--fanouts", default="10,10,10")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each setting, alternated")
    parser.add_argument("--skip-pg", action="store_true")
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args()
    fanouts = [int(f) for f in args.fanouts.split(",")]
    print(
        f"group_commit · simulation brain, zero latency · max_concurrent {args.max_concurrent} · "
        f"{os.cpu_count()} CPUs · load {os.getloadavg()[0]:.1f}"
    )
    header = (
        f"{'store, setting':<28} {'tasks':>6} {'writes/t':>9} {'commits/t':>10} "
        f"{'writes/c':>9} {'commits/s':>10} {'ms/task':>8} {'CPU ms/t':>8}"
    )
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(0 if args.skip_sqlite else args.rounds):
            for grouped in (False, True):
                work = Path(tmp) / f"sqlite-{i}-{grouped}"
                url = f"sqlite:///{work / 'firm.db'}"
                work.mkdir()
                label = "sqlite, " + ("grouped" if grouped else "one commit per write")
                show(label, measure(url, fanouts, args.max_concurrent, grouped, work))
        if args.skip_pg:
            return
        import pgcluster

        # Durable, as a production server is: here each commit waits for its fsync.
        pgcluster.SERVER_SETTINGS.update(fsync="on", synchronous_commit="on", full_page_writes="on")
        server = pgcluster.PgServer()
        try:
            for i in range(args.rounds):
                for grouped in (False, True):
                    url = server.create_database()
                    work = Path(tmp) / f"pg-{i}-{grouped}"
                    work.mkdir()
                    label = "postgresql, " + ("grouped" if grouped else "one commit per write")
                    show(label, measure(url, fanouts, args.max_concurrent, grouped, work))
                    server.drop_database(url)
        finally:
            server.stop()
        print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
