"""A subtree's cancel in a bundle: one `cancelled` entry whose ended tasks are listed beside it.

The entry's data says how many tasks it ended and the digest of their ids (firm/endings.py);
the bundle carries the ids in the entry's `ended_ids`, outside what the chain hashes, so the
list is checked against the digest the chain vouches for. Every check after integrity reads
the entries expanded: one ending per task, as the log said before cancels were one entry.
"""

from __future__ import annotations

from typing import Any

from firm.endings import ends_many, expand, list_problem


def ended_ids(raw: dict[str, Any]) -> list[str] | None:
    """The ids a bundle entry lists beside its data (None when it lists none)."""
    ids = raw.get("ended_ids")
    return ids if isinstance(ids, list) else None


def list_problems(entries: list[Any]) -> list[str]:
    """Each disclosed subtree cancel whose list is missing or does not match its digest."""
    problems = []
    for e in entries:
        if e.data is not None and ends_many(e.kind, e.data):
            problem = list_problem(e.data, e.ended)
            if problem:
                problems.append(f"entry {e.seq} (cancelled of {e.task_id}): {problem}")
    return problems


def expanded(entries: list[Any]) -> list[Any]:
    """The entries with each subtree cancel as one ending per task it lists."""
    return list(expand(entries, lambda e: e.ended or []))
