"""Verify an exported bundle offline, from the bundle and the company's public key alone.

Three checks, each with a verdict (PASS, FAIL, or SKIP when it could not run):

- integrity: every entry's hash recomputes from its content, each links to the one before,
  sequence numbers run without a gap, the last entry is the head the signature covers, the
  signature (and every checkpoint signature inside) is valid for the key, nothing the other
  checks need is withheld, the org chart is the one the run was created with, and each
  status change of the tree's tasks is one the task state machine allows;
- monotonicity: every delegated grant is within its delegator's grant in every dimension
  (scopes, ceilings, expiry, budget), within the assignee's own authority in the org chart,
  along the chart (to a direct report), and siblings' budgets add up to no more than their
  delegator's;
- containment: every allowed tool call of the tree was within its node's grant (scope and
  the agent's own tools, each limited argument within its ceiling), checked before the node or
  any ancestor was revoked — the cascade recomputed from the tree, not read from the log —,
  before the node ended, and before any of their grants expired. Where a check stood in the
  log is what the call's entry says (checked_seq: the head when the check read the state),
  but never earlier than the node's previous entry (for a call with a write-ahead start, the
  entry before its start): its session had seen that one.

Budgets are carved at delegation and checked by monotonicity; token usage is not in the log,
so spending within a budget is not something a bundle can prove.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from firm.audit.approvals import approval_problems
from firm.audit.cancels import ended_ids, expanded, list_problems
from firm.audit.export import DISCLOSED_KINDS, FORMAT
from firm.audit.keys import public_text, signature_valid
from firm.audit.plans import plan_problems
from firm.audit.writeahead import check_write_ahead
from firm.authority import grants as g
from firm.authority.check import EXEMPT_FROM_EXPIRY
from firm.authority.scopes import allows
from firm.chain import digest, header_hash
from firm.errors import OrgChartError
from firm.events import CREATION, ENDINGS, EventKind, transition_problems
from firm.org import OrgChart, parse_org

LIFECYCLE = frozenset({"delegate_task", "complete_task", "fail_task"})
PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


@dataclass(frozen=True)
class Check:
    name: str
    verdict: str
    detail: str

    def line(self) -> str:
        return f"{self.name:<13} {self.verdict:<5} {self.detail}"


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)
    # The signed head's seq when some task of the tree had not ended there: the bundle then
    # proves a prefix of the record (an export mid-run, or a bundle cut back to an earlier
    # signed checkpoint), never the whole of it.
    open_at: int | None = None

    @property
    def holds(self) -> bool:
        """Every check passes (what the bundle shows is genuine, whole or not)."""
        return bool(self.checks) and all(c.verdict == PASS for c in self.checks)

    @property
    def verified(self) -> bool:
        """Every check passes and the tree had ended: the bundle is the whole record."""
        return self.holds and self.open_at is None

    @property
    def partial(self) -> bool:
        return self.holds and self.open_at is not None

    def partial_line(self) -> str:
        return (
            f"PARTIAL: the tree was still open at seq {self.open_at}: the bundle proves the "
            "record up to there, not how it ended"
        )

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)


@dataclass(frozen=True)
class Entry:
    seq: int
    ts: float
    kind: str
    task_id: str | None
    agent: str | None
    prev: str
    hash: str
    data: dict[str, Any] | None  # None when withheld
    data_digest: str
    ended: list[str] | None = None  # a subtree cancel's ids, beside its data (audit/cancels.py)


@dataclass
class Node:
    id: str
    parent: str | None
    assignee: str
    delegator: str | None
    seq: int
    ts: float
    grant: g.Grant | None
    grant_problem: str | None


class Malformed(Exception):
    pass


# --- reading the bundle ------------------------------------------------------------------------


def _entries(bundle: Any) -> list[Entry]:
    if not isinstance(bundle, dict):
        raise Malformed("the bundle is not a JSON object")
    if bundle.get("format") != FORMAT:
        raise Malformed(f"the bundle's format is {bundle.get('format')!r}, not {FORMAT!r}")
    raw = bundle.get("entries")
    if not isinstance(raw, list) or not raw:
        raise Malformed("the bundle has no entries")
    out = []
    for i, r in enumerate(raw):
        try:
            data = r.get("data")
            if data is not None and not isinstance(data, dict):
                raise TypeError("data is not an object")
            data_digest = digest(data) if data is not None else r["data_digest"]
            e = Entry(
                seq=int(r["seq"]),
                ts=float(r["ts"]),
                kind=str(r["kind"]),
                task_id=r.get("task_id"),
                agent=r.get("agent"),
                prev=str(r["prev"]),
                hash=str(r["hash"]),
                data=data,
                data_digest=str(data_digest),
                ended=ended_ids(r),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise Malformed(f"entry {i} of the bundle is malformed ({exc})") from None
        out.append(e)
    return out


def _head(bundle: dict[str, Any]) -> tuple[int, str, str]:
    head = bundle.get("head")
    try:
        return int(head["seq"]), str(head["hash"]), str(head["signature"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        raise Malformed("the bundle has no signed head") from None


def _nodes(entries: list[Entry]) -> dict[str, Node]:
    nodes: dict[str, Node] = {}
    for e in entries:
        if e.kind not in CREATION or e.data is None or e.task_id is None:
            continue
        raw = e.data.get("grant")
        grant, problem = None, None
        if raw is None:
            problem = "no grant recorded"
        else:
            try:
                grant = g.Grant.from_dict(raw)
            except g.GrantError as exc:
                problem = str(exc)
        if e.kind == EventKind.CREATED:
            parent, assignee, delegator = None, e.agent, None
        else:
            parent, assignee, delegator = e.data.get("parent_id"), e.data.get("to"), e.agent
        nodes.setdefault(
            e.task_id,
            Node(e.task_id, parent, str(assignee), delegator, e.seq, e.ts, grant, problem),
        )
    return nodes


def _subtree(nodes: dict[str, Node], top: str) -> set[str]:
    children: dict[str, list[str]] = {}
    for n in nodes.values():
        if n.parent is not None:
            children.setdefault(n.parent, []).append(n.id)
    out, stack = set(), [top]
    while stack:
        cur = stack.pop()
        if cur in out:
            continue
        out.add(cur)
        stack.extend(children.get(cur, []))
    return out


def _path_up(nodes: dict[str, Node], task_id: str) -> list[str]:
    """The task and its ancestors, nearest first, as far as the bundle knows them."""
    out, cur = [], nodes.get(task_id)
    while cur is not None and cur.id not in out:
        out.append(cur.id)
        cur = nodes.get(cur.parent) if cur.parent else None
    return out


# --- the checks ----------------------------------------------------------------------------------


def _integrity(
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
        seq, hash_, signature = _head(bundle)
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
                ok = isinstance(cseq, int) and isinstance(chash, str)
                ok = ok and signature_valid(key, cseq, chash, str(e.data.get("signature")))
                if ok and cseq in by_seq and by_seq[cseq].hash != chash:
                    ok = False
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


def _monotonicity(nodes: dict[str, Node], relevant: list[str], org: OrgChart | None) -> Check:
    problems: list[str] = []
    delegations = 0
    for tid in relevant:
        n = nodes[tid]
        if n.grant is None:
            problems.append(f"{tid}: {n.grant_problem}")
            continue
        if org is not None and org.has_agent(n.assignee):
            own = g.authority_of(org, n.assignee, n.ts)
            for why in g.why_not_within(n.grant, own):
                problems.append(f"{tid} ({n.assignee}) beyond its own authority: {why}")
        elif org is not None:
            problems.append(f"{tid}: {n.assignee!r} is not in the org chart")
        if n.parent is None:
            continue
        delegations += 1
        parent = nodes.get(n.parent)
        if parent is None:
            problems.append(f"{tid}: delegated by {n.parent}, which the bundle does not create")
            continue
        if n.delegator != parent.assignee:
            problems.append(f"{tid}: delegated by {n.delegator}, not by {parent.assignee}")
        if org is not None and not org.is_report(parent.assignee, n.assignee):
            problems.append(f"{tid}: {n.assignee} does not report to {parent.assignee}")
        if parent.grant is None:
            continue
        for why in g.why_not_within(n.grant, parent.grant):
            problems.append(f"{tid} wider than its delegator {parent.id}: {why}")
    for tid in relevant:
        n = nodes[tid]
        if n.grant is None or n.grant.budget_tokens is None:
            continue
        kids = [c for c in nodes.values() if c.parent == tid and c.grant is not None]
        carved = sum(c.grant.budget_tokens or 0 for c in kids)  # type: ignore[union-attr]
        if carved > n.grant.budget_tokens:
            problems.append(
                f"{tid}'s subtasks hold {carved} budget tokens, more than its "
                f"{n.grant.budget_tokens}"
            )
    if problems:
        return Check("monotonicity", FAIL, "; ".join(problems[:5]) + _more(problems))
    return Check(
        "monotonicity",
        PASS,
        f"{delegations} delegation(s), each within its delegator's grant "
        "(scopes, ceilings, expiry, budget) and the assignee's own authority",
    )


def _approvals(
    entries: list[Entry], nodes: dict[str, Node], tree: set[str], org: OrgChart | None
) -> Check:
    assignees = {tid: n.assignee for tid, n in nodes.items()}
    problems, good = approval_problems(entries, tree, assignees, org)
    held, started = plan_problems(entries, tree, org)  # approved delegations
    problems += held
    if problems:
        return Check("approvals", FAIL, "; ".join(problems[:5]) + _more(problems))
    plans = f"; {started} subtask(s) of gated managers started after their plan's approval"
    return Check(
        "approvals",
        PASS,
        f"{good} approval-gated call(s) ran, each once, after a person approved exactly its "
        "arguments before any timeout" + (plans if started else ""),
    )


def _more(problems: list[str]) -> str:
    return f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""


def _containment(
    entries: list[Entry], nodes: dict[str, Node], tree: set[str], org: OrgChart | None
) -> Check:
    revoked_at: dict[str, int] = {}
    ended_at: dict[str, int] = {}
    for e in entries:
        if e.kind == EventKind.REVOKED and e.task_id is not None:
            revoked_at.setdefault(e.task_id, e.seq)
        if e.kind in ENDINGS and e.task_id is not None:
            ended_at.setdefault(e.task_id, e.seq)
    problems: list[str] = []
    allowed = denied = 0
    last_seen: dict[str, int] = {}
    # A call answering a write-ahead start was checked before it: its session saw the entries
    # before the start (its result may be written later, after a cancel that came meanwhile).
    before_start: dict[int, int | None] = {}
    for e in entries:
        tid = e.task_id
        previous = last_seen.get(tid) if tid is not None else None
        if tid is not None:
            last_seen[tid] = e.seq
        if e.kind == EventKind.TOOL_STARTED:
            before_start[e.seq] = previous
        started = (e.data or {}).get("started_seq") if e.kind == EventKind.TOOL_CALL else None
        previous = before_start.get(started, previous) if isinstance(started, int) else previous
        if tid not in tree or e.data is None:
            continue
        if e.kind == EventKind.TOOL_DENIED:
            denied += 1
        if e.kind != EventKind.TOOL_CALL or e.data.get("allowed") is not True:
            continue
        allowed += 1
        problem = _contained(e, previous, nodes, revoked_at, ended_at, org)
        if problem:
            problems.append(f"entry {e.seq} ({e.data.get('tool')} by {tid}): {problem}")
    recorded = check_write_ahead(entries, tree)
    problems.extend(recorded.problems)
    if problems:
        return Check("containment", FAIL, "; ".join(problems[:5]) + _more(problems))
    return Check(
        "containment",
        PASS,
        f"{allowed} allowed call(s), each within its node's grant, before any revocation "
        f"or expiry; {denied} denial(s) logged; {recorded.summary()}",
    )


def _contained(
    e: Entry,
    previous: int | None,
    nodes: dict[str, Node],
    revoked_at: dict[str, int],
    ended_at: dict[str, int],
    org: OrgChart | None,
) -> str | None:
    assert e.data is not None and e.task_id is not None
    node = nodes[e.task_id]
    tool = str(e.data.get("tool"))
    if e.agent != node.assignee:
        return f"made by {e.agent}, but the task is {node.assignee}'s"
    grant = node.grant
    if grant is None:
        return "the task has no grant"
    if tool == "ask_human":
        # Not a scope: the chart's `ask_human:` decides who may ask a person.
        if org is not None and not org.may_ask_human(node.assignee):
            return f"the org chart does not let {node.assignee} ask a person (ask_human)"
    elif tool not in LIFECYCLE:
        if not grant.allows(tool):
            return f"{tool} is outside the task's grant ({', '.join(grant.scopes) or 'none'})"
        if org is not None and not allows(org.tools_of(node.assignee), tool):
            return f"{node.assignee}'s own tools do not include {tool}"
        problem = _within_ceilings(e.data, grant)
        if problem:
            return problem
    # Where the check stood in the log: it read the state after the node's previous entry.
    # An entry written after its session was cut off (cancelled, or re-run elsewhere) says
    # so ("superseded"): its task's later entries came before it in the log, not before
    # its check, so only its own checked_seq places it.
    checked = e.data.get("checked_seq")
    at = checked if isinstance(checked, int) and checked < e.seq else e.seq
    if previous is not None and e.data.get("superseded") is not True:
        at = max(at, previous)
    for anc in _path_up(nodes, e.task_id):
        r = revoked_at.get(anc)
        if r is not None and at >= r:
            whose = "the task" if anc == e.task_id else f"its ancestor {anc}"
            return f"allowed after {whose} was revoked (entry {r})"
    end = ended_at.get(e.task_id)
    if end is not None and at >= end:
        return f"allowed after the task ended (entry {end})"
    when = e.data.get("checked_at")
    t = float(when) if isinstance(when, int | float) and when <= e.ts else e.ts
    if tool not in EXEMPT_FROM_EXPIRY:
        for anc in _path_up(nodes, e.task_id):
            ag = nodes[anc].grant
            if ag is not None and ag.expires_at is not None and t > ag.expires_at:
                whose = "its grant" if anc == e.task_id else f"the grant of {anc}"
                return f"allowed at {t:.3f}, after {whose} expired at {ag.expires_at:.3f}"
    return None


def _within_ceilings(data: dict[str, Any], grant: g.Grant) -> str | None:
    ceilings = data.get("ceilings") or {}
    values = data.get("limited_args") or {}
    if not isinstance(ceilings, dict) or not isinstance(values, dict):
        return "its limited arguments are malformed"
    for arg, name in ceilings.items():
        if name not in grant.limits:
            continue
        v = values.get(arg)
        if isinstance(v, bool) or not isinstance(v, int | float):
            return f"{arg} was not given, but {name} bounds it"
        if v > grant.limits[name]:
            return f"{arg}={v} is above the ceiling {name}={grant.limits[name]}"
    return None


# --- the whole -------------------------------------------------------------------------------


def verify_bundle(bundle: Any, key: Ed25519PublicKey | None) -> Report:
    """Run every check; the report is `verified` only if all pass and a key was given."""
    try:
        entries = _entries(bundle)
    except Malformed as exc:
        return Report(
            [
                Check("integrity", FAIL, str(exc)),
                Check("monotonicity", SKIP, "not run: nothing to check"),
                Check("containment", SKIP, "not run: nothing to check"),
                Check("approvals", SKIP, "not run: nothing to check"),
            ]
        )
    nodes = _nodes(entries)
    top = str(bundle.get("task"))
    tree = _subtree(nodes, top) if top in nodes else set()
    integrity, org = _integrity(bundle, entries, key, nodes, tree)
    if not tree:
        missing = f"the bundle does not create task {top!r}"
        return Report(
            [
                integrity,
                Check("monotonicity", FAIL, missing),
                Check("containment", FAIL, missing),
                Check("approvals", FAIL, missing),
            ]
        )
    relevant = list(dict.fromkeys([*reversed(_path_up(nodes, top)), *sorted(tree)]))
    flat = expanded(entries)  # a subtree's cancel as one ending per task
    return Report(
        [
            integrity,
            _monotonicity(nodes, relevant, org),
            _containment(flat, nodes, tree, org),
            _approvals(flat, nodes, tree, org),
        ],
        open_at=_open_at(flat, tree),
    )


def _open_at(entries: list[Entry], tree: set[str]) -> int | None:
    """The last entry's seq when a task of the tree has no ending in the bundle, else None."""
    ended = {e.task_id for e in entries if e.kind in ENDINGS and e.task_id in tree}
    return entries[-1].seq if ended != tree else None
