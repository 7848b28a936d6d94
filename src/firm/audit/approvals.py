"""The verifier's approvals check: every body of an approval-gated tool ran only after a
person approved exactly those arguments (their digest), before any timeout, and only once.

Which tools are gated is read from the bundle's org chart (the one the run was created
with), so a call that should have waited and did not is caught, not only a call that
names an approval it does not have.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from firm.audit.bundle import Entry
from firm.events import EventKind
from firm.org import OrgChart

LIFECYCLE = frozenset({"delegate_task", "complete_task", "fail_task", "ask_human"})


@dataclass
class _Asked:
    seq: int
    task_id: str | None
    tool: Any
    args_digest: Any
    timeout_at: Any


@dataclass
class _Decided:
    seq: int
    ts: float
    decision: Any
    by: Any
    args_digest: Any
    withdrawn_at: int | None = None  # the seq of a withdrawal after the approval


def approval_problems(
    entries: Iterable[Entry], tree: set[str], assignees: dict[str, str], org: OrgChart | None
) -> tuple[list[str], int]:
    """The problems found, and how many gated calls ran properly."""
    asked: dict[str, _Asked] = {}
    decided: dict[str, _Decided] = {}
    used: dict[str, int] = {}
    problems: list[str] = []
    good = 0
    for e in entries:
        d = e.data
        if d is None or e.task_id not in tree:
            continue
        aid = d.get("id")
        if e.kind == EventKind.APPROVAL_REQUESTED and isinstance(aid, str):
            if aid in asked:
                problems.append(f"entry {e.seq}: approval {aid} is requested twice")
            asked[aid] = _Asked(
                e.seq, e.task_id, d.get("tool"), d.get("args_digest"), d.get("timeout_at")
            )
            continue
        if e.kind == EventKind.APPROVAL_DECIDED and isinstance(aid, str):
            earlier = decided.get(aid)
            if (
                earlier is not None
                and earlier.decision == "approved"
                and earlier.withdrawn_at is None
                and d.get("decision") == "withdrawn"
            ):
                # An approved call whose task was cancelled before the call ran: the one
                # decision that may follow an approval, and the body must not run after it.
                earlier.withdrawn_at = e.seq
                continue
            if aid in decided:
                problems.append(f"entry {e.seq}: approval {aid} is decided a second time")
                continue
            decided[aid] = _Decided(
                e.seq, e.ts, d.get("decision"), d.get("by"), d.get("args_digest")
            )
            continue
        if e.kind != EventKind.TOOL_CALL or d.get("allowed") is not True:
            continue
        tool = str(d.get("tool"))
        if tool in LIFECYCLE:
            continue
        aid = d.get("approval")
        assignee = assignees.get(e.task_id or "", e.agent or "")
        gated = org is not None and org.approval_for(assignee, tool) is not None
        if aid is None:
            if gated:
                problems.append(
                    f"entry {e.seq}: {tool} by {e.task_id} ran without a person's approval, "
                    "which the org chart requires"
                )
            continue
        problem = _approved(e, str(aid), tool, asked, decided)
        used[str(aid)] = used.get(str(aid), 0) + 1
        if problem is None and used[str(aid)] > 1:
            problem = f"approval {aid} was used by more than one run of the body"
        if problem is not None:
            problems.append(f"entry {e.seq} ({tool} by {e.task_id}): {problem}")
        else:
            good += 1
    return problems, good


def _approved(
    e: Entry, aid: str, tool: str, asked: dict[str, _Asked], decided: dict[str, _Decided]
) -> str | None:
    assert e.data is not None
    req = asked.get(aid)
    if req is None:
        return f"names approval {aid}, which was never requested before it"
    if req.task_id != e.task_id or req.tool != tool:
        return f"approval {aid} was asked for {req.tool} by {req.task_id}, not this call"
    if req.args_digest != e.data.get("args_digest"):
        return f"its arguments are not the ones approval {aid} was asked for"
    dec = decided.get(aid)
    if dec is None:
        return f"approval {aid} was never decided before the body ran"
    if dec.decision != "approved":
        return f"approval {aid} was {dec.decision}, not approved"
    if dec.withdrawn_at is not None and dec.withdrawn_at < e.seq:
        return f"approval {aid} was withdrawn (entry {dec.withdrawn_at}) before the body ran"
    if not isinstance(dec.by, str) or not dec.by.strip() or dec.by == "timeout":
        return f"approval {aid} does not say who approved it"
    if dec.args_digest != req.args_digest:
        return f"approval {aid} approved other arguments than were asked for"
    if isinstance(req.timeout_at, int | float) and dec.ts > req.timeout_at:
        return f"approval {aid} was given at {dec.ts:.3f}, after its timeout {req.timeout_at:.3f}"
    return None
