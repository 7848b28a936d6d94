"""Per-task cost as the store grows: the same company run on stores already holding N tasks.

The store is filled with N finished tasks (in runs of 1,000, inserted in bulk) and a log of N
entries (appended through the store, so the hash chain is real); then a 1 → 10 → 100 company
runs to the end with the simulation brain at zero latency. If per-task cost depends on the
store's size, a statement scans something that grows: every hot statement should use an index.

    python benchmarks/store_growth.py [--sizes 0,1000,10000,100000] [--max-concurrent 4]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from sqlalchemy import event, insert

from firm.engine import Engine
from firm.org import parse_org
from firm.store import open_store, schema

ORG = """company: Growth
agents:
  - {id: a, name: A, title: Chief Executive Officer}
""" + "".join(
    f"  - {{id: m{i}, name: M{i}, title: Engineering Manager, reports_to: a}}\n"
    + "".join(
        f"  - {{id: e{i}-{j}, name: E{i}-{j}, title: Backend Engineer, reports_to: m{i}}}\n"
        for j in range(10)
    )
    for i in range(10)
)


def fill(store, n: int) -> None:  # type: ignore[no-untyped-def]
    now = time.time()
    rows = []
    for i in range(n):
        if i % 1000 == 0:
            root = f"T-old{i:08d}"
        tid = root if i % 1000 == 0 else f"T-old{i:08d}"
        rows.append(
            {
                "id": tid,
                "root_id": root,
                "parent_id": None if tid == root else root,
                "title": f"old {i}",
                "description": "",
                "status": "done",
                "assignee": "a",
                "created_by": "user",
                "priority": 1,
                "language": "en",
                "result": "ok",
                "files": "[]",
                "error": None,
                "created_at": now,
                "updated_at": now,
                "started_at": now,
                "finished_at": now,
                "turn": 0,
                "attempts": 1,
                "dedupe_key": None,
                "grant": None,
                "revoked": False,
                "worker_id": None,
                "lease_expires_at": None,
                "calls": 0,
                "prompt_tokens": 0,
                "completion_tokens": 0,
            }
        )
    with store.engine.begin() as conn:
        for start in range(0, n, 5000):
            conn.execute(insert(schema.tasks), rows[start : start + 5000])
    for start in range(0, n, 2000):
        store.append_events(
            [("thought", r["id"], "a", {"text": "old work"}) for r in rows[start : start + 2000]]
        )


def measure(size: int, max_concurrent: int) -> tuple[int, float, float]:
    org = parse_org(ORG, "<growth>")
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "growth.db")
        fill(store, size)
        statements = 0

        def count(*_a: object) -> None:
            nonlocal statements
            statements += 1

        event.listen(store.engine, "before_cursor_execute", count)
        engine = Engine(store, max_concurrent=max_concurrent, heartbeat=0.5)
        t0 = time.perf_counter()
        root = engine.submit(org, "Ship the product", workspace=Path(tmp) / "ws")
        done = engine.run_until(root.id)
        wall = time.perf_counter() - t0
        engine.stop()
        assert done.status.value == "done", done
        n = len(store.subtree(root.id))
        store.close()
    return n, wall / n * 1000, statements / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0,1000,10000,100000")
    parser.add_argument("--max-concurrent", type=int, default=4)
    args = parser.parse_args()
    print(f"store_growth · SQLite · simulation brain · max_concurrent {args.max_concurrent}")
    print(f"{'tasks already in the store':>27} {'run tasks':>10} {'ms/task':>8} {'SQL/task':>9}")
    for size in (int(s) for s in args.sizes.split(",")):
        n, ms, sql = measure(size, args.max_concurrent)
        print(f"{size:>27,} {n:>10} {ms:>8.2f} {sql:>9.1f}")


if __name__ == "__main__":
    main()
