"""The chain's header hash spells its JSON directly; it must be canonical_json's spelling."""

from __future__ import annotations

import hashlib
import random

from firm.chain import canonical_json, header_hash

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
