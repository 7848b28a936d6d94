"""The verifier's write-ahead rule: every body ran after its record was committed.

A non-lifecycle call writes `tool_started` before its body and `tool_call` (naming that start
in `started_seq`) after it, so a bundle proves each body had its record first, and a start
left unanswered by a killed session is answered `interrupted` (it may have run) by the next.
Calls logged before firm wrote starts carry no `started_seq`: they are counted apart, as
recorded only after their body, so a reader sees how much of a log predates the rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from firm.audit.bundle import Entry
from firm.events import EventKind

LIFECYCLE = frozenset({"delegate_task", "complete_task", "fail_task"})


@dataclass
class WriteAhead:
    ran: int = 0  # bodies that ran with their record written first
    interrupted: int = 0  # starts answered as cut off: the body may have run
    unanswered: int = 0  # starts with no answer yet (a session still running, or not resumed)
    legacy: int = 0  # calls from before the rule, recorded after their body
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"{self.ran} body(ies) ran after their record was written"]
        if self.interrupted:
            parts.append(f"{self.interrupted} cut off mid-call (may have run)")
        if self.unanswered:
            parts.append(f"{self.unanswered} started and not yet answered")
        if self.legacy:
            parts.append(f"{self.legacy} logged by an older firm after their body")
        return "; ".join(parts)


def check_write_ahead(entries: Iterable[Entry], tree: set[str]) -> WriteAhead:
    out = WriteAhead()
    starts: dict[int, Entry] = {}
    answers: dict[int, list[bool]] = {}  # start seq -> interrupted flag of each answer
    for e in entries:
        d = e.data
        if d is None or e.task_id not in tree:
            continue
        if e.kind == EventKind.TOOL_STARTED:
            starts[e.seq] = e
            continue
        if e.kind != EventKind.TOOL_CALL or d.get("allowed") is not True:
            continue
        if d.get("tool") in LIFECYCLE or "approval" in d:
            continue  # a lifecycle call is its own transaction; an approved one is claimed
        if "started_seq" not in d:
            out.legacy += 1
            continue
        start = starts.get(d["started_seq"]) if isinstance(d["started_seq"], int) else None
        where = f"entry {e.seq} ({d.get('tool')} by {e.task_id})"
        if start is None or start.task_id != e.task_id:
            out.problems.append(f"{where}: names no earlier start of its task")
            continue
        sd = start.data or {}
        if (sd.get("tool"), sd.get("args_digest")) != (d.get("tool"), d.get("args_digest")):
            out.problems.append(f"{where}: differs from the call its start recorded")
            continue
        flags = answers.setdefault(start.seq, [])
        cut = d.get("interrupted") is True
        # A start is answered once; the one exception is a session cut off by its lease that
        # still reports after the next session has answered for it (superseded).
        if flags and not (d.get("superseded") is True and flags == [True] and not cut):
            out.problems.append(f"{where}: answers start {start.seq} a second time")
            continue
        flags.append(cut)
        if cut:
            out.interrupted += 1
        else:
            out.ran += 1
    out.unanswered = sum(1 for seq in starts if seq not in answers)
    return out
