"""Export a task tree's audit trail as a self-contained, signed bundle.

The log is one chain for the whole store, so a tree's events are a subset of it, interleaved
with other runs'. A bundle carries the whole span of the chain from the run's `created` event
to the tree's last event — every entry, so the links can be checked with nothing missing —
and signs the last one. Entries of the tree, and every `created`, `delegated`, `revoked` and
`checkpoint` entry, are disclosed in full; the rest (other runs' work, the ancestors' own
tool calls and thoughts) appear as their header and a digest of their data: enough to recompute
the chain, not enough to read them. Because a header shows its kind and task, a withheld entry
cannot be one the verifier needs. A subtree's cancel (one `cancelled` entry for all the tasks
it ended, firm/endings.py) on the tree or above it is disclosed too, with the ids it ended
beside its data in `ended_ids`: the verifier checks them against the entry's digest.

Bundle format (JSON, "format": "firm-audit-bundle/1")::

    {"format", "task" (the exported tree's top), "run" (its root), "exported_at",
     "org": {"source", "yaml"},
     "entries": [{"seq", "ts", "kind", "task_id", "agent", "prev", "hash",
                  "data": {...}  or  "data_digest": "<sha256>",
                  "ended_ids": [...] (a subtree's cancel only)}, ...],
     "head": {"seq", "hash", "signature", "public_key"}}
"""

from __future__ import annotations

import time
from typing import Any

from firm.audit.checkpoint import sign_entry
from firm.audit.keys import AuditKey
from firm.chain import digest, entry_hash
from firm.endings import ends_many
from firm.errors import FirmError
from firm.events import EventKind
from firm.store.base import Event, Store

FORMAT = "firm-audit-bundle/1"
DISCLOSED_KINDS = frozenset(
    {EventKind.CREATED, EventKind.DELEGATED, EventKind.REVOKED, EventKind.CHECKPOINT}
)
PAGE = 2000


class ExportError(FirmError):
    """The trail cannot be exported as asked (or the store's log is broken)."""


def _span(store: Store, first: int, last: int) -> list[Event]:
    out: list[Event] = []
    after = first - 1
    while after < last:
        page = store.events_after(after, limit=min(PAGE, last - after))
        if not page:
            break
        out.extend(page)
        after = page[-1].seq
    return out


def _check_chain(events: list[Event]) -> None:
    """Refuse to sign a log that does not hash up: that would vouch for a tampered store."""
    prev = events[0].prev_hash
    for i, e in enumerate(events):
        if i and e.seq != events[i - 1].seq + 1:
            raise ExportError(f"the store's log has a gap before entry {e.seq}; refusing to sign")
        if (
            e.prev_hash != prev
            or entry_hash(e.prev_hash, e.seq, e.ts, e.kind, e.task_id, e.agent, e.data) != e.hash
        ):
            raise ExportError(
                f"the store's log does not hash up at entry {e.seq} ({e.kind}); it was altered "
                "after it was written — refusing to sign it"
            )
        prev = e.hash


def _entry(store: Store, e: Event, disclose: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "seq": e.seq,
        "ts": e.ts,
        "kind": e.kind,
        "task_id": e.task_id,
        "agent": e.agent,
        "prev": e.prev_hash,
        "hash": e.hash,
    }
    if disclose:
        out["data"] = e.data
        if ends_many(e.kind, e.data):
            out["ended_ids"] = store.ended_by(e.seq)
    else:
        out["data_digest"] = digest(e.data)
    return out


def _ancestors(store: Store, task_id: str | None) -> set[str]:
    out: set[str] = set()
    while task_id is not None and task_id not in out:
        out.add(task_id)
        task_id = store.get_task(task_id).parent_id
    return out


def _disclosed(e: Event, tree: set[str], above: set[str]) -> bool:
    if e.task_id in tree or e.kind in DISCLOSED_KINDS:
        return True
    return e.task_id in above and ends_many(e.kind, e.data)


def export_bundle(store: Store, task_id: str, key: AuditKey) -> dict[str, Any]:
    """The bundle for `task_id` and its subtree, signed with `key` (recorded as a checkpoint)."""
    tree = store.subtree(task_id)
    ids = {t.id for t in tree}
    above = _ancestors(store, tree[0].parent_id)  # a cancel there may have ended the tree
    run_id = tree[0].root_id
    run = store.run(run_id)
    start = store.event_span([run_id])
    span = store.event_span(ids)
    if start is None or span is None:
        raise ExportError(f"task {task_id} has no events in the log")
    cancel = store.last_cancel_over(task_id)  # its entry may be on an ancestor, later
    if cancel is not None and cancel > span[1]:
        span = (span[0], cancel)
    events = _span(store, start[0], span[1])
    if not events or events[0].seq != start[0] or events[-1].seq != span[1]:
        raise ExportError(f"the log lacks entries between {start[0]} and {span[1]}")
    _check_chain(events)
    head = sign_entry(store, key, span[1], task_id=task_id, reason="export")
    return {
        "format": FORMAT,
        "task": task_id,
        "run": run_id,
        "exported_at": round(time.time(), 6),
        "org": {"source": run.org_source, "yaml": run.org_yaml},
        "entries": [_entry(store, e, _disclosed(e, ids, above)) for e in events],
        "head": head,
    }
