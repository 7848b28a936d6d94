"""A store-level watcher, as `firm serve` watches: events_after + wait_for_change, in a process
of its own. Writes one line per event ("seq kind task_id"), or "GAP ..." if a sequence number is
ever skipped, and exits when the given root task's completion arrives.

    python watch_events.py URL ROOT_ID OUT_FILE
"""

from __future__ import annotations

import sys

from firm.store import open_store


def main(url: str, root_id: str, out_path: str) -> None:
    store = open_store(url)
    store.listen_poll_interval = 3600  # prove LISTEN/NOTIFY wakes us: no slow polling behind it
    seq = 0
    with open(out_path, "w", encoding="utf-8") as out:
        while True:
            events = store.events_after(seq, limit=500)
            for e in events:
                if e.seq != seq + 1:
                    out.write(f"GAP after {seq}: got {e.seq}\n")
                out.write(f"{e.seq} {e.kind} {e.task_id}\n")
                out.flush()
                seq = e.seq
                if e.task_id == root_id and e.kind in ("completed", "failed", "cancelled"):
                    store.close()
                    return
            if not events:
                store.wait_for_change(seq, 60)


if __name__ == "__main__":
    main(*sys.argv[1:4])
