"""The hash chain over events. Pure functions, shared by the store (append) and verify (check).

Each entry's hash covers its header — seq, time, kind, task, agent, the previous entry's hash
— and a digest of its data, not the data itself. So an exported bundle can show an entry of
another run by its header and data digest alone ("redacted") and the chain still checks: the
verifier recomputes every hash in the span, disclosed or not, and the kind and task of a
redacted entry stay visible, so it cannot hide an event of the tree being exported.
"""

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


def header_hash(
    prev_hash: str,
    seq: int,
    ts: float,
    kind: str,
    task_id: str | None,
    agent: str | None,
    data_digest: str,
) -> str:
    body = canonical_json(
        {
            "seq": seq,
            "ts": ts,
            "kind": kind,
            "task_id": task_id,
            "agent": agent,
            "data": data_digest,
            "prev": prev_hash,
        }
    )
    return hashlib.sha256(body.encode()).hexdigest()


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
    return header_hash(prev_hash, seq, ts, kind, task_id, agent, digest(data))
