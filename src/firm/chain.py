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
import math
from json.encoder import encode_basestring as _encode  # what dumps uses, ensure_ascii off
from typing import Any

GENESIS = "0" * 64


# json.dumps with these options builds an encoder per call (~1.5 µs, as much as encoding a
# small entry); one built once spells every value the same (encode keeps no state).
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
# What _CANONICAL.encode runs, called directly: the C encoder with _CANONICAL's options. The
# same bytes, without encode's and iterencode's Python frames (a third of encoding a small
# entry). Built once, with no record of the containers being encoded (a new dict per call,
# and what refuses a circular value): a circular value recurses until the interpreter's limit
# instead, and is refused then, as ValueError still.
_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_ENCODE = (
    None
    if _make_encoder is None
    else _make_encoder(None, _CANONICAL.default, _encode, None, ":", ",", True, False, False)
)


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces, UTF-8 kept as is."""
    if _ENCODE is None:
        return _CANONICAL.encode(value)
    try:
        return "".join(_ENCODE(value, 0))
    except RecursionError:
        raise ValueError("Circular reference detected, or a value nested too deep") from None


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
    # Every entry written or verified passes here (a cancel of 10,000 tasks, 10,000 times), so
    # the header's canonical JSON is spelled out directly for the plain types it holds — the
    # very bytes canonical_json would give — and anything else takes the general path.
    if (
        type(seq) is int
        and type(ts) is float
        and math.isfinite(ts)
        and type(kind) is str
        and type(prev_hash) is str
        and type(data_digest) is str
        and (task_id is None or type(task_id) is str)
        and (agent is None or type(agent) is str)
    ):
        body = (
            f'{{"agent":{_string(agent)},"data":{_encode(data_digest)},"kind":{_encode(kind)},'
            f'"prev":{_encode(prev_hash)},"seq":{seq},"task_id":{_string(task_id)},'
            f'"ts":{float.__repr__(ts)}}}'
        )
    else:
        body = _header_json(prev_hash, seq, ts, kind, task_id, agent, data_digest)
    return hashlib.sha256(body.encode()).hexdigest()


def chained(
    prev_hash: str, seq: int, ts: float, entries: list[tuple[str, str | None, str | None, str]]
) -> list[str]:
    """The hashes of entries (kind, task, agent, data digest) appended one after another after
    (prev_hash, seq), all at time ts: header_hash's bytes for each, with what they share (the
    time, a run of one task's entries) spelled once, not once an entry. An entry of any other
    types (or a time or seq that is not a plain finite float and int) takes header_hash."""
    plain = type(ts) is float and math.isfinite(ts) and type(seq) is int
    at = f',"ts":{float.__repr__(ts)}}}' if plain else ""
    spelled: dict[str | None, str] = {None: "null"}
    hashes = []
    sha256 = hashlib.sha256
    for kind, task_id, agent, data_digest in entries:
        seq += 1
        if not (
            plain
            and type(kind) is str
            and type(prev_hash) is str
            and type(data_digest) is str
            and (task_id is None or type(task_id) is str)
            and (agent is None or type(agent) is str)
        ):
            prev_hash = header_hash(prev_hash, seq, ts, kind, task_id, agent, data_digest)
            hashes.append(prev_hash)
            continue
        task = spelled.get(task_id)
        if task is None:
            task = spelled[task_id] = _string(task_id)
        who = spelled.get(agent)
        if who is None:
            who = spelled[agent] = _string(agent)
        body = (
            f'{{"agent":{who},"data":{_encode(data_digest)},"kind":{_encode(kind)},'
            f'"prev":{_encode(prev_hash)},"seq":{seq},"task_id":{task}{at}'
        )
        prev_hash = sha256(body.encode()).hexdigest()
        hashes.append(prev_hash)
    return hashes


def _string(value: str | None) -> str:
    return "null" if value is None else _encode(value)


def _header_json(
    prev_hash: str,
    seq: int,
    ts: float,
    kind: str,
    task_id: str | None,
    agent: str | None,
    data_digest: str,
) -> str:
    return canonical_json(
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
