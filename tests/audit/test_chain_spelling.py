"""The chain's header hash spells its JSON directly; it must be canonical_json's spelling."""

from __future__ import annotations

import hashlib
import random

import pytest

from firm.chain import canonical_json, chained, header_hash

CHARS = 'ab"\\\n\t\x00\x1f\u2028é漢😀/<>&'


def general(*header: object) -> str:
    prev, seq, ts, kind, task_id, agent, data = header
    body = {
        "seq": seq,
        "ts": ts,
        "kind": kind,
        "task_id": task_id,
        "agent": agent,
        "data": data,
        "prev": prev,
    }
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def test_the_header_hash_is_the_hash_of_the_headers_canonical_json() -> None:
    rnd = random.Random(7)

    def text() -> str:
        return "".join(rnd.choice(CHARS) for _ in range(rnd.randint(0, 12)))

    times = [1796107195.633916, 1e22, 1e-7, 0.0, -0.0, 5.0, 17]  # 17: an int, from a bundle
    for _ in range(3000):
        header = (
            text(),
            rnd.randint(0, 10**12),
            rnd.choice([*times, rnd.random() * 2e9]),
            text(),
            rnd.choice([None, text()]),
            rnd.choice([None, text()]),
            text(),
        )
        assert header_hash(*header) == general(*header), header


def test_a_commits_entries_chained_at_once_hash_as_one_by_one() -> None:
    """The store chains a commit's entries together (chain.chained), spelling their shared
    time and a run of one task's entries once: each hash must be the header's own."""
    rnd = random.Random(11)

    def text() -> str:
        return "".join(rnd.choice(CHARS) for _ in range(rnd.randint(0, 12)))

    times = [1796107195.633916, 1e22, 0.0, -0.0, 17, float("nan")]
    for _ in range(500):
        prev, seq, ts = text(), rnd.randint(0, 10**9), rnd.choice([*times, rnd.random() * 2e9])
        tasks, agents = [None, text(), text()], [None, text(), 3]  # 3: not text, spelled as JSON
        entries = [
            (text(), rnd.choice(tasks), rnd.choice(agents), text())
            for _ in range(rnd.randint(1, 6))
        ]
        expected, at = [], prev
        for n, (kind, task_id, agent, data) in enumerate(entries, start=seq + 1):
            at = general(at, n, ts, kind, task_id, agent, data) if ts == ts else "nan"
            expected.append(at)
        if ts != ts:  # not finite: refused as canonical_json refuses it
            with pytest.raises(ValueError):
                chained(prev, seq, ts, entries)  # type: ignore[arg-type]
            continue
        assert chained(prev, seq, ts, entries) == expected  # type: ignore[arg-type]
