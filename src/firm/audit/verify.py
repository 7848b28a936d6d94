"""Verify an exported bundle offline, from the bundle and the company's public key alone.

Four checks, each with a verdict (PASS, FAIL, or SKIP when it could not run), each in a
module of its own:

- integrity (audit/integrity.py): the hash chain, its signatures, the org chart the run was
  created with, and every status change allowed by the task state machine;
- monotonicity (audit/monotonicity.py): no delegate holds more authority than its delegator,
  nor more than its own in the org chart;
- containment (audit/containment.py): every allowed tool call stood within its node's grant,
  before any revocation, ending or expiry, and had its write-ahead record;
- approvals (here): every approval-gated call ran once, after a person approved exactly its
  arguments, and a gated manager's subtasks started only after their plan's approval.

Budgets are carved at delegation and checked by monotonicity; token usage is not in the log,
so spending within a budget is not something a bundle can prove.
"""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from firm.audit.approvals import approval_problems
from firm.audit.bundle import Entry, Malformed, Node, nodes_of, path_up, read_entries, subtree
from firm.audit.cancels import expanded
from firm.audit.containment import containment
from firm.audit.integrity import integrity as check_integrity
from firm.audit.monotonicity import monotonicity
from firm.audit.plans import plan_problems
from firm.audit.report import FAIL, SKIP, Check, Report, verdict
from firm.events import ENDINGS
from firm.org import OrgChart


def _approvals(
    entries: list[Entry], nodes: dict[str, Node], tree: set[str], org: OrgChart | None
) -> Check:
    assignees = {tid: n.assignee for tid, n in nodes.items()}
    problems, good = approval_problems(entries, tree, assignees, org)
    held, started = plan_problems(entries, tree, org)  # approved delegations
    problems += held
    plans = f"; {started} subtask(s) of gated managers started after their plan's approval"
    return verdict(
        "approvals",
        problems,
        f"{good} approval-gated call(s) ran, each once, after a person approved exactly its "
        "arguments before any timeout" + (plans if started else ""),
    )


# --- the whole -------------------------------------------------------------------------------


def verify_bundle(bundle: Any, key: Ed25519PublicKey | None) -> Report:
    """Run every check; the report is `verified` only if all pass and a key was given."""
    try:
        entries = read_entries(bundle)
    except Malformed as exc:
        return Report(
            [
                Check("integrity", FAIL, str(exc)),
                Check("monotonicity", SKIP, "not run: nothing to check"),
                Check("containment", SKIP, "not run: nothing to check"),
                Check("approvals", SKIP, "not run: nothing to check"),
            ]
        )
    nodes = nodes_of(entries)
    top = str(bundle.get("task"))
    tree = subtree(nodes, top) if top in nodes else set()
    integrity, org = check_integrity(bundle, entries, key, nodes, tree)
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
    relevant = list(dict.fromkeys([*reversed(path_up(nodes, top)), *sorted(tree)]))
    flat = expanded(entries)  # a subtree's cancel as one ending per task
    return Report(
        [
            integrity,
            monotonicity(nodes, relevant, org),
            containment(flat, nodes, tree, org),
            _approvals(flat, nodes, tree, org),
        ],
        open_at=_open_at(flat, tree),
    )


def _open_at(entries: list[Entry], tree: set[str]) -> int | None:
    """The last entry's seq when a task of the tree has no ending in the bundle, else None."""
    ended = {e.task_id for e in entries if e.kind in ENDINGS and e.task_id in tree}
    return entries[-1].seq if ended != tree else None
