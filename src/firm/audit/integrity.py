"""The integrity check: the chain, its signatures, the org chart and the state machine.

Every entry's hash recomputes from its content, each links to the one before, sequence
numbers run without a gap, the last entry is the head the signature covers, the signature
(and every checkpoint signature inside) is valid for the key, nothing the other checks need is
withheld, the org chart is the one the run was created with, and each status change of the
tree's tasks is one the task state machine allows.
"""

from __future__ import annotations

import hashlib
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from firm.audit.bundle import Entry, Malformed, Node, signed_head
from firm.audit.cancels import expanded, list_problems
from firm.audit.export import DISCLOSED_KINDS
from firm.audit.keys import public_text, signature_valid
from firm.audit.report import FAIL, PASS, Check
from firm.chain import header_hash
from firm.errors import OrgChartError
from firm.events import EventKind, transition_problems
from firm.org import OrgChart, parse_org


def integrity(
    bundle: dict[str, Any],
    entries: list[Entry],
    key: Ed25519PublicKey | None,
    nodes: dict[str, Node],
    tree: set[str],
) -> tuple[Check, OrgChart | None]:
    problems: list[str] = []
    for i, e in enumerate(entries):
        if i and e.seq != entries[i - 1].seq + 1:
            problems.append(
                f"entries {entries[i - 1].seq} and {e.seq} are not consecutive "
                "(an entry deleted, inserted or moved)"
            )
            break
        if header_hash(e.prev, e.seq, e.ts, e.kind, e.task_id, e.agent, e.data_digest) != e.hash:
            problems.append(f"entry {e.seq} ({e.kind}) does not match its hash (it was altered)")
            break
        if i and e.prev != entries[i - 1].hash:
            problems.append(
                f"entry {e.seq} does not link to entry {entries[i - 1].seq} "
                "(an entry deleted, inserted or replaced)"
            )
            break
    try:
        seq, hash_, signature = signed_head(bundle)
    except Malformed as exc:
        problems.append(str(exc))
        seq, hash_, signature = -1, "", ""
    last = entries[-1]
    if seq >= 0 and (seq != last.seq or hash_ != last.hash):
        problems.append(
            f"the signed head is entry {seq} but the bundle ends at entry {last.seq} "
            "(entries cut off or added at the end)"
        )
    first = entries[0]
    run = bundle.get("run")
    if first.kind != EventKind.CREATED or first.task_id != run:
        problems.append(f"the bundle does not start with the creation of its run {run!r}")
    if bundle.get("task") not in tree:
        problems.append(f"the task {bundle.get('task')!r} is not created in the bundle")
    for e in entries:
        if e.data is None and (e.kind in DISCLOSED_KINDS or e.task_id in tree):
            problems.append(f"entry {e.seq} ({e.kind} of {e.task_id}) is withheld")
            break
    # Headers suffice (kind and task are never withheld); a kind this version does not know
    # changes no status, so an older or newer log is read as far as it can be.
    problems.extend(list_problems(entries)[:3])
    flat = expanded(entries)
    problems.extend(transition_problems(((e.seq, e.kind, e.task_id) for e in flat), tree)[:3])
    signed = ""
    if key is None:
        problems.append(
            "no public key given, so the signature is unchecked and the bundle cannot vouch "
            f"for itself (it names {_named_key(bundle)}); pass --pubkey"
        )
    elif seq >= 0:
        if not signature_valid(key, seq, hash_, signature):
            problems.append(f"the signature over entry {seq} is not valid for {public_text(key)}")
        else:
            signed = f"; head {seq} signed by {public_text(key)}"
        by_seq = {e.seq: e for e in entries}
        for e in entries:
            if e.kind == EventKind.CHECKPOINT and e.data is not None:
                cseq, chash = e.data.get("seq"), e.data.get("hash")
                ok = (
                    isinstance(cseq, int)
                    and isinstance(chash, str)
                    and signature_valid(key, cseq, chash, str(e.data.get("signature")))
                    and (cseq not in by_seq or by_seq[cseq].hash == chash)
                )
                if not ok:
                    problems.append(f"the checkpoint at entry {e.seq} does not verify")
                    break
    # The org chart is parsed last, and only when the chain and its signature hold: a hostile
    # bundle gets no parser time for text its signer never vouched for.
    org: OrgChart | None = None
    if len(problems) == (1 if key is None else 0):
        org, org_problem = _org(bundle, first)
        if org_problem:
            problems.append(org_problem)
    else:
        problems.append("the org chart is not read: the entries do not verify")
    if problems:
        return Check("integrity", FAIL, "; ".join(problems)), org
    return (
        Check(
            "integrity",
            PASS,
            f"{len(entries)} entries ({first.seq}–{last.seq}) hash-chained{signed}",
        ),
        org,
    )


def _named_key(bundle: dict[str, Any]) -> str:
    head = bundle.get("head")
    named = head.get("public_key") if isinstance(head, dict) else None
    return str(named) if named else "no key"


# Far above any real chart (a 10,000-agent chart is about 1.5 MB).
ORG_TEXT_MAX = 8_000_000


def _org(bundle: dict[str, Any], first: Entry) -> tuple[OrgChart | None, str | None]:
    org_part = bundle.get("org")
    text = org_part.get("yaml") if isinstance(org_part, dict) else None
    if not isinstance(text, str):
        return None, "the bundle has no org chart"
    if len(text) > ORG_TEXT_MAX:
        return None, f"the bundle's org chart is {len(text)} characters, over {ORG_TEXT_MAX}"
    expected = (first.data or {}).get("org_sha256")
    if expected is not None and hashlib.sha256(text.encode()).hexdigest() != expected:
        return None, "the org chart in the bundle is not the one the run was created with"
    try:
        return parse_org(text, str(org_part.get("source") or "<bundle>")), None  # type: ignore[union-attr]
    except OrgChartError as exc:
        return None, f"the bundle's org chart does not load: {exc}"
