"""Cancelling a 10,000-task subtree: the time and the SQL statements it takes.

A goal with 100 reports, each with 99 reports of its own (10,001 open tasks, built with the
store's own batched delegation), is cancelled from the top; then the same subtree one
level under a goal, whose cancel walks the subtree (a goal's takes its run's open tasks).
Printed: the wall time and CPU of `store.cancel` (the process's, and the caller's thread's:
a cancel of 1,000 tasks or more leaves its WAL checkpoint to a thread of its own, whose CPU
the process's counts while it runs), the statements it sent (an executemany is
one; with --sql, each one's first words) and the log entries it wrote (one since issue 16:
the subtree's root's `cancelled`); then the same for a second subtree of the same shape in
the same store ("again"), the cost once the process has cancelled before.

    python benchmarks/cancel_subtree.py [--db URL] [--fanout 100]

With a PostgreSQL URL, each case gets a database of its own on that server (created, then
dropped), so both start from an empty store.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import create_engine, event, text

from firm.store import NewTask, RunSpec, open_store

RUN = RunSpec(
    id="bench",
    org_yaml="",
    org_source="<bench>",
    brain="simulation",
    brain_options={},
    workspace=".",
)


def build(store, fanout: int, below_root: bool) -> str:  # type: ignore[no-untyped-def]
    """The subtree to cancel: a goal's whole run, or (below_root) a task one level under the
    goal, whose cancel walks its subtree instead of taking the run's open tasks."""
    root = store.create_run(RUN, NewTask("Goal", "", "ceo", "user"))
    store.claim("w", 1, 3600)
    top = root.id
    if below_root:
        (vp,) = store.delegate_many(root.id, 0, [([], NewTask("Division", "", "vp", "ceo"))], "w")
        store.claim("w", 1, 3600)
        top = vp.task.id
    kids = store.delegate_many(
        top, 0, [([], NewTask(f"Part {i}", "", "m", "ceo")) for i in range(fanout)], "w"
    )
    claimed = store.claim("w", fanout, 3600)
    assert len(claimed) == fanout
    for kid in kids:
        items = [([], NewTask(f"Leaf {j}", "", "e", "m")) for j in range(fanout - 1)]
        store.delegate_many(kid.task.id, 0, items, "w")
    return top


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="a store URL (default: a new SQLite file)")
    parser.add_argument("--fanout", type=int, default=100)
    parser.add_argument("--sql", action="store_true", help="list the statements sent")
    args = parser.parse_args()
    for below_root in (False, True):
        measure(args, below_root)


@contextlib.contextmanager
def fresh_db(url: str | None) -> Iterator[str | Path]:
    """A new SQLite file, or a new database on the PostgreSQL server of `url`."""
    if url is None or not url.startswith("postgresql"):
        with tempfile.TemporaryDirectory() as tmp:
            yield url or Path(tmp) / "cancel.db"
        return
    name = f"firm_cancel_{uuid.uuid4().hex[:8]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield f"{url.rpartition('/')[0]}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
        admin.dispose()


def timed_cancel(store, top_id: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Cancel top_id's subtree: its wall time and CPU, the statements sent, the entries."""
    sent: list[str] = []

    def count(_conn: object, _cursor: object, statement: str, *_a: object) -> None:
        sent.append(" ".join(statement.split())[:90])

    size = len(store.subtree(top_id))
    head = store.last_seq()
    event.listen(store.engine, "before_cursor_execute", count)
    t0, cpu0, own0 = time.perf_counter(), time.process_time(), time.thread_time()
    cancelled = store.cancel(top_id, "benchmark")
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    own = time.thread_time() - own0
    event.remove(store.engine, "before_cursor_execute", count)
    entries = sum(1 for e in store.events_after(head, limit=10 * size) if e.kind == "cancelled")
    return {
        "n": len(cancelled),
        "s": seconds,
        "cpu": cpu,
        "own": own,
        "sent": sent,
        "entries": entries,
    }


def measure(args: argparse.Namespace, below_root: bool) -> None:
    """The subtree's cancel, then the same again in the same store: the first is what `firm
    cancel` pays (and, for the first case, the first cancel of the process: each event kind's
    validator and each statement are made the first time they are used); the second is what
    an engine that has cancelled before pays (`firm serve`, a long-running worker)."""
    with fresh_db(args.db) as db:
        store = open_store(db, migrate=True)
        t0 = time.perf_counter()
        top_id = build(store, args.fanout, below_root)
        built = time.perf_counter() - t0
        size = len(store.subtree(top_id))
        first = timed_cancel(store, top_id)
        again = timed_cancel(store, build(store, args.fanout, below_root))
        store.close()
    what = "a task below the goal (a walk)" if below_root else "a goal (its run)"
    print(
        f"cancel_subtree · {store.dialect} · {size} open tasks under {what}, built in {built:.1f} s"
    )
    for label, r in (("cancel", first), ("again ", again)):
        n = r["n"]
        print(
            f"  {label}: {n} tasks in {r['s'] * 1000:.0f} ms · {len(r['sent'])} SQL "
            f"statements · {r['entries']} log entries · {r['s'] / n * 1e6:.0f} µs per task "
            f"({r['cpu'] / n * 1e6:.0f} µs of CPU; {r['cpu'] * 1000:.0f} ms in all, "
            f"{r['own'] * 1000:.0f} ms in the caller's thread)"
        )
    if args.sql:
        for s in first["sent"]:
            print(f"    {s}")


if __name__ == "__main__":
    main()
