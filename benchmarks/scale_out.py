"""Scale-out figures: companies of 1, 10, 100 and 1,000 agents, and the 1 → 10 → 100 → 1,000
tree (1,111 agents, as engine_throughput.py builds it), with a 20 ms simulated turn,
first on SQLite (one engine in this process), then on PostgreSQL with 1, 2 and 4 worker
processes (`python -m firm worker`).

Printed for each run: sessions and tasks, wall time, tasks/s, and claim latency — from the
moment a task became todo (its created, delegated, woken or requeued event) to the moment a
worker claimed it (its started event), median and p99, read from the audit log. On PostgreSQL
also what waking cost, per task, summed over the workers (each prints its counts when it
stops): claim rounds, the empty ones (a worker woke, claimed and found nothing), and wake-ups
by another process's commit (NOTIFY). At the end, tasks/s with 1, 2 and 4 workers side by side.

    python benchmarks/scale_out.py                       # starts a throwaway PostgreSQL
    python benchmarks/scale_out.py --pg-url postgresql://firm@127.0.0.1:5432/postgres
    python benchmarks/scale_out.py --sizes 1,10,100 --workers 1,2
    python benchmarks/scale_out.py --sizes 100 --turn 0.5 --per-worker 4 --skip-sqlite
                                     # sessions that wait (as on a model) rather than compute

The PostgreSQL part needs PostgreSQL installed (tests/postgres/pgcluster.py starts it the way
the tests do) and `pip install 'firm[postgres]'`. Figures are for reading, not asserting.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from firm.engine import Engine
from firm.org import parse_org
from firm.store import SqlStore, open_store

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "postgres"))

TURN = 0.02  # seconds per simulated turn (--turn)
SLOTS = 16  # sessions per worker (--per-worker)
TODO_KINDS = {"created", "delegated", "woken", "requeued"}
STOP_LINE = re.compile(rb"(\d+) claims, (\d+) found nothing; woken (\d+) times")


TREE = 1111  # the size that means the 1 → 10 → 100 → 1,000 tree of engine_throughput.py


def company(n: int) -> str:
    """n agents: a CEO with up to nine reports, every other manager with up to ten — or, for
    "tree" (1,111), the four-level company with ten reports per manager."""
    if n == TREE:
        return tree_company()
    lines = ["company: Bench Co", "max_concurrent: 16", "agents:"]
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


def tree_company() -> str:
    lines = ["company: Bench Co", "max_concurrent: 16", "agents:"]
    lines.append("  - {id: a, name: A, title: Chief Executive Officer}")
    level = ["a"]
    for depth in range(3):
        title = "Backend Engineer" if depth == 2 else "Engineering Manager"
        nxt = []
        for boss in level:
            for i in range(10):
                aid = f"{boss}-{i}"
                lines.append(f"  - {{id: {aid}, name: {aid}, title: {title}, reports_to: {boss}}}")
                nxt.append(aid)
        level = nxt
    return "\n".join(lines) + "\n"


def claim_latencies(store: SqlStore, root_id: str) -> list[float]:
    ids = {t.id for t in store.subtree(root_id)}
    ready: dict[str, float] = {}
    waits = []
    seq = 0
    while batch := store.events_after(seq, 5000):
        for e in batch:
            if e.task_id in ids:
                if e.kind in TODO_KINDS:
                    ready[e.task_id] = e.ts
                elif e.kind == "started" and e.task_id in ready:
                    waits.append(e.ts - ready.pop(e.task_id))
        seq = batch[-1].seq
    return waits


def p(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def wake_costs(work: Path, n: int, tasks: int) -> str:
    """Claims, empty claims and NOTIFY wake-ups per task, summed over the workers' stop lines."""
    totals = [0, 0, 0]
    for i in range(n):
        found = STOP_LINE.search((work / f"worker-{i}.log").read_bytes())
        if found is None:
            return "   (a worker printed no counts)"
        totals = [t + int(v) for t, v in zip(totals, found.groups(), strict=True)]
    claims, empty, woken = (t / max(tasks, 1) for t in totals)
    return f"   per task: {claims:.2f} claims, {empty:.2f} empty, {woken:.2f} wake-ups"


def report(label: str, store: SqlStore, root_id: str, wall: float, extra: str = "") -> float:
    tasks = store.subtree(root_id)
    sessions = sum(1 for e in store.events_after(0, 10**7) if e.kind == "started")
    waits = claim_latencies(store, root_id)
    rate = len(tasks) / wall
    bad = sum(1 for t in tasks if str(t.status) != "done")
    print(
        f"{label:<28} {len(tasks):>6} tasks {sessions:>6} sessions {wall:>7.2f}s "
        f"{rate:>8.1f} tasks/s   claim latency median {statistics.median(waits) * 1000:>7.1f} ms"
        f"  p99 {p(waits, 0.99) * 1000:>7.1f} ms" + extra + (f"   NOT DONE: {bad}" if bad else ""),
        flush=True,
    )
    return rate


def run_sqlite(size: int, work: Path) -> None:
    org = parse_org(company(size), "<bench>")
    store = open_store(work / f"sqlite-{size}" / "firm.db")
    engine = Engine(store, max_concurrent=SLOTS, heartbeat=0.5)
    root = engine.submit(
        org, "Grow the business", brain_options={"latency": TURN}, workspace=work / f"ws-{size}"
    )
    start = time.perf_counter()
    engine.run_until(root.id)
    wall = time.perf_counter() - start
    engine.stop()
    report(f"sqlite, {size} agents", store, root.id, wall)
    store.close()


def start_workers(url: str, n: int, work: Path) -> list[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if k != "FIRM_DB"}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "firm",
                "worker",
                "--db",
                url,
                "--max-concurrent",
                str(SLOTS),
                "--heartbeat",
                "0.5",
                "--quiet",
            ],
            cwd=work,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(work / f"worker-{i}.log", "wb"),  # noqa: SIM115
        )
        for i in range(n)
    ]
    return procs


def wait_until_listening(url: str, n: int) -> None:
    import psycopg

    name = url.rpartition("/")[2]
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            (listening,) = conn.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = %s AND application_name LIKE 'firm-listen:%%'",
                (name,),
            ).fetchone()
            if listening >= n:
                return
            time.sleep(0.05)


def run_postgres(server, size: int, workers: int, work: Path) -> float:  # type: ignore[no-untyped-def]
    url = server.create_database()
    store = open_store(url)
    procs = start_workers(url, workers, work)
    wait_until_listening(url, workers)  # worker start-up is not part of the figures
    org = parse_org(company(size), "<bench>")
    engine = Engine(store)  # used only to submit; the workers do the work
    root = engine.submit(
        org, "Grow the business", brain_options={"latency": TURN}, workspace=work / f"ws-{size}"
    )
    start = time.perf_counter()
    while not store.get_task(root.id).terminal:
        time.sleep(0.02)
    wall = time.perf_counter() - start
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        proc.wait(60)
    extra = wake_costs(work, workers, len(store.subtree(root.id)))
    rate = report(f"postgresql, {size} agents, {workers}w", store, root.id, wall, extra)
    engine.stop()
    store.close()
    server.drop_database(url)
    return rate


def main() -> None:
    global TURN, SLOTS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="1,10,100,1000,tree",
        help="agents per company; 'tree' is the 1 → 10 → 100 → 1,000 company (1,111 agents)",
    )
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--pg-url", help="an existing server to make databases on")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--turn", type=float, default=TURN, help="seconds per simulated turn")
    parser.add_argument("--per-worker", type=int, default=SLOTS, help="sessions per worker")
    args = parser.parse_args()
    TURN, SLOTS = args.turn, args.per_worker
    sizes = [TREE if s == "tree" else int(s) for s in args.sizes.split(",")]
    counts = [int(w) for w in args.workers.split(",")]
    work = Path(tempfile.mkdtemp(prefix="firm-bench-"))
    print(f"{TURN * 1000:.0f} ms per simulated turn; {os.cpu_count()} CPUs\n", flush=True)
    try:
        if not args.skip_sqlite:
            print(f"SQLite, one engine, {SLOTS} sessions at once", flush=True)
            for size in sizes:
                run_sqlite(size, work)
            print(flush=True)
        if args.pg_url:
            os.environ["FIRM_TEST_PG_URL"] = args.pg_url
        from pgcluster import PgServer

        server = PgServer()
        table: dict[int, dict[int, float]] = {}
        try:
            print(f"PostgreSQL, worker processes of {SLOTS} sessions each", flush=True)
            for size in sizes:
                rates = table[size] = {w: run_postgres(server, size, w, work) for w in counts}
                if len(rates) > 1 and size >= 100:
                    base = rates[counts[0]]
                    growth = ", ".join(f"{w}w ×{rates[w] / base:.2f}" for w in counts)
                    print(f"{'':<28} throughput vs {counts[0]} worker: {growth}", flush=True)
        finally:
            server.stop()
        print(f"\ntasks/s on PostgreSQL (load {os.getloadavg()[0]:.1f})", flush=True)
        print(f"{'agents':>8}" + "".join(f"{f'{w} worker(s)':>14}" for w in counts))
        for size, rates in table.items():
            print(f"{size:>8}" + "".join(f"{rates[w]:>14.1f}" for w in counts), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
