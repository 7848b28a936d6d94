"""The hash chain over events. Pure functions, shared by the store (append) and verify (check)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

GENESIS = "0" * 64


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def digest(value: Any) -> str:
    """sha256 of a value's canonical JSON; used for tool arguments and results in the log."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def entry_hash(
    prev_hash: str,
    seq: int,
    ts: float,
    kind: str,
    task_id: str | None,
    agent: str | None,
    data: dict[str, Any],
) -> str:
    """Each entry commits to the one before it, so no entry can change, vanish or move unseen."""
    body = canonical_json(
        {
            "seq": seq,
            "ts": ts,
            "kind": kind,
            "task_id": task_id,
            "agent": agent,
            "data": data,
            "prev": prev_hash,
        }
    )
    return hashlib.sha256(body.encode()).hexdigest()
