"""The containment check: every allowed tool call stood within its node's grant.

Scope and the agent's own tools, each limited argument within its ceiling, checked before the
node or any ancestor was revoked (the cascade recomputed from the tree, not read from the
log), before the node ended, and before any of their grants expired. Where a check stood in
the log is what the call's entry says (checked_seq: the head when the check read the state),
but never earlier than the node's previous entry (for a call with a write-ahead start, the
entry before its start): its session had seen that one.
"""

from __future__ import annotations

from typing import Any

from firm.audit.bundle import Entry, Node, path_up
from firm.audit.report import Check, verdict
from firm.audit.writeahead import LIFECYCLE, check_write_ahead
from firm.authority import grants as g
from firm.authority.check import EXEMPT_FROM_EXPIRY
from firm.authority.scopes import allows
from firm.endcall import with_calls
from firm.events import ENDINGS, EventKind
from firm.org import OrgChart


def containment(
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
    for e in with_calls(entries):  # an ending's call too, as its own entry (firm/endcall.py)
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
    return verdict(
        "containment",
        problems,
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
    for anc in path_up(nodes, e.task_id):
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
        for anc in path_up(nodes, e.task_id):
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
