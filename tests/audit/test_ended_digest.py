"""A cancel's digest of the tasks it ended is what any reader can redo from the ids alone:
the sha256 of their canonical JSON list, sorted (firm/endings.py). The ids firm makes are
joined directly instead of encoded one by one; any id, these or others, must give the bytes
the encoder gives, or a verifier holding only the ids would call the entry altered."""

from __future__ import annotations

import hashlib

import pytest

from firm.chain import canonical_json
from firm.endings import ended_sha256


@pytest.mark.parametrize(
    "ids",
    [
        [],
        ["T-0123456789abcdef"],
        [f"T-{i:016x}" for i in range(2000, 0, -7)],
        ['say "hi"', "back\\slash", "tab\there", "nul\x00", "del\x7f"],
        ["café", "line\u2028sep", "emoji 🙂"],
        ["same", "same"],
    ],
)
def test_the_digest_is_of_the_sorted_ids_canonical_json(ids: list[str]) -> None:
    expected = hashlib.sha256(canonical_json(sorted(ids)).encode()).hexdigest()
    assert ended_sha256(ids) == expected
