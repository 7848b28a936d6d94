"""An exported bundle read for verification: its entries, its signed head and its task tree.

Nothing here trusts the bundle: a malformed one raises `Malformed` with where it went wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from firm.audit.cancels import ended_ids
from firm.audit.export import FORMAT
from firm.authority import grants as g
from firm.chain import digest
from firm.events import CREATION, EventKind


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


def read_entries(bundle: Any) -> list[Entry]:
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


def signed_head(bundle: dict[str, Any]) -> tuple[int, str, str]:
    head = bundle.get("head")
    try:
        return int(head["seq"]), str(head["hash"]), str(head["signature"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        raise Malformed("the bundle has no signed head") from None


def nodes_of(entries: list[Entry]) -> dict[str, Node]:
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


def subtree(nodes: dict[str, Node], top: str) -> set[str]:
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


def path_up(nodes: dict[str, Node], task_id: str) -> list[str]:
    """The task and its ancestors, nearest first, as far as the bundle knows them."""
    out, cur = [], nodes.get(task_id)
    while cur is not None and cur.id not in out:
        out.append(cur.id)
        cur = nodes.get(cur.parent) if cur.parent else None
    return out
