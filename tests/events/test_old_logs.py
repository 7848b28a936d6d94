"""Logs written by older versions stay readable and verifiable."""

from __future__ import annotations

import json
from pathlib import Path

from firm.audit.keys import parse_public_key
from firm.audit.verify import verify_bundle

DATA = Path(__file__).parent / "data"


def test_a_bundle_exported_by_the_first_version_with_audit_still_verifies() -> None:
    """Written by commit 8a20680 (`firm run` with the simulation brain, one report failing,
    then `firm audit export`): every check passes with today's verifier and catalogue."""
    bundle = json.loads((DATA / "bundle-8a20680.json").read_text())
    key = parse_public_key((DATA / "bundle-8a20680.pub").read_text().strip())
    report = verify_bundle(bundle, key)
    assert report.verified, [c.line() for c in report.checks]
    kinds = {e["kind"] for e in bundle["entries"]}
    assert {"created", "delegated", "failed", "waiting", "woken", "checkpoint"} <= kinds
