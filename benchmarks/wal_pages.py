"""WAL pages a commit, by b-tree: what each kind of commit writes in engine_throughput's company.

Runs the 1 → 10 → 100 → 1,000 company (simulation brain, zero latency) on SQLite with the
store's checkpoints off, so every commit's frames stay in the WAL. After each commit it notes
the WAL's length and the commit's writing statements; every few hundred commits it asks
SQLite's `dbstat` which table or index owns each page. A commit's frames are then counted by
owner (a page's owner is taken from the next look, before a freed page can be reused) and by
kind of commit: a settle (with the next claim), a log-only commit (the write-ahead record), a
delegation. `page 1` is the file's header, rewritten by every commit that grows the file.

    python benchmarks/wal_pages.py [--fanouts 10,10,10] [--page-size 4096]

A study tool: it switches the checkpoint thread off by patching the store's module, so it
reads private parts of the store and may need updating when they change.
"""

from __future__ import annotations

import argparse
import collections
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Any

from engine_throughput import generated_org
from firm.engine import Engine
from firm.org import parse_org
from firm.store import latecheckpoint, migrate, open_store
from firm.store.prepared import sqlite_driver

# SQLite's names for the indexes of a column's PRIMARY KEY and UNIQUE, in the order declared.
NAMES = {
    "sqlite_autoindex_tasks_1": "tasks.id (primary key)",
    "sqlite_autoindex_tasks_2": "tasks.dedupe_key (unique)",
}
LOOK_EVERY = 200  # commits between two looks at the pages' owners
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "WITH")


class Recorder:
    """Each commit's frames (from the WAL's length) and writing statements (from SQLite's
    trace of the writer's connection), and the pages' owners every LOOK_EVERY commits."""

    def __init__(self, db: Path, page_size: int):
        self.db = db
        self.frame = 24 + page_size
        self.statements: dict[int, list[str]] = collections.defaultdict(list)
        self.commits: list[tuple[int, list[str]]] = []  # (frames in the WAL after it, SQL)
        self.looks: list[tuple[int, dict[int, str]]] = []  # (commits before, page -> owner)

    def trace(self, sql: str) -> None:
        if sql.lstrip().split(None, 1)[0].upper() in WRITES:
            self.statements[threading.get_ident()].append(" ".join(sql.split()))

    def committed(self) -> None:
        wal = Path(f"{self.db}-wal")
        frames = (wal.stat().st_size - 32) // self.frame if wal.exists() else 0
        self.commits.append((frames, self.statements.pop(threading.get_ident(), [])))
        if len(self.commits) % LOOK_EVERY == 0:
            self.look()

    def look(self) -> None:
        with sqlite3.connect(self.db) as conn:
            rows = conn.execute("SELECT name, pageno FROM dbstat").fetchall()
        owners = {pg: NAMES.get(name, name) for name, pg in rows}
        owners[1] = "page 1"
        self.looks.append((len(self.commits), owners))


def kind_of(statements: list[str]) -> str:
    if any(s.startswith("INSERT INTO tasks") for s in statements):
        return "delegation"
    if any("SET status='done'" in s or "SET status='failed'" in s for s in statements):
        return "settle"
    if statements and all(s.startswith("INSERT INTO events") for s in statements):
        return "log only"
    return "other"


def wal_pages(wal: Path, page_size: int) -> list[int]:
    data = wal.read_bytes()
    frame = 24 + page_size
    return [int.from_bytes(data[o : o + 4], "big") for o in range(32, len(data) - frame + 1, frame)]


def measure(fanouts: list[int], page_size: int) -> None:
    if page_size != 4096:  # the image a new store is written from, at another page size
        original = migrate.create_at_head

        def create_at_head(conn: Any) -> None:
            sqlite_driver(conn).execute(f"PRAGMA page_size={page_size}")
            original(conn)

        migrate.create_at_head = create_at_head  # type: ignore[assignment]
    org = parse_org(generated_org(fanouts), "<generated>")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "firm.db"
        rec = Recorder(db, page_size)

        def prepare(conn: Any) -> None:
            driver = sqlite_driver(conn)
            driver.execute("PRAGMA wal_autocheckpoint=0")
            driver.set_trace_callback(rec.trace)

        def committed(_self: Any) -> None:
            rec.committed()

        latecheckpoint.LateCheckpoints.prepare = staticmethod(prepare)  # type: ignore[method-assign]
        latecheckpoint.LateCheckpoints.committed = committed  # type: ignore[method-assign]
        store = open_store(db)
        engine = Engine(store, max_concurrent=4, heartbeat=0.5)
        root = engine.submit(org, "Ship the product", workspace=Path(tmp) / "ws")
        done = engine.run_until(root.id)
        engine.stop()
        rec.look()
        pages = wal_pages(Path(f"{db}-wal"), page_size)
        tasks = len(store.subtree(root.id))
        assert done.status.value == "done", done
        report(rec, pages, tasks)
        store.close()


def report(rec: Recorder, pages: list[int], tasks: int) -> None:
    by_kind: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    commits: collections.Counter[str] = collections.Counter()
    frames: collections.Counter[str] = collections.Counter()
    look = 0
    before = 0
    for i, (after, statements) in enumerate(rec.commits):
        while rec.looks[look][0] <= i:
            look += 1
        owners = rec.looks[look][1]
        kind = kind_of(statements)
        commits[kind] += 1
        frames[kind] += after - before
        by_kind[kind].update(owners.get(pg, "(freed)") for pg in pages[before:after])
        before = after
    total = sum(frames.values())
    print(
        f"{tasks} tasks, {sum(commits.values())} commits, {total} WAL frames: "
        f"{total / tasks:.1f} a task"
    )
    for kind, n in commits.most_common():
        print(f"\n{kind}: {n} commits, {frames[kind] / n:.2f} frames each")
        for owner, count in by_kind[kind].most_common():
            if count / n >= 0.01:
                print(f"    {owner:<34} {count / n:6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fanouts", default="10,10,10")
    parser.add_argument("--page-size", type=int, default=4096)
    args = parser.parse_args()
    measure([int(f) for f in args.fanouts.split(",")], args.page_size)


if __name__ == "__main__":
    main()
