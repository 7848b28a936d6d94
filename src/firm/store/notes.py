"""Notes: what a person leaves on a task for its agent. A note is an entry of the signed log
(kind `note`) and nothing more — no table, no change of state: the task's next brief reads
its notes back from the log (events are indexed by task). A note on a finished task is
recorded and shown, and changes nothing."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select

from firm.errors import TaskNotFound
from firm.events import EventKind
from firm.people import person_name, person_text
from firm.store import queries as Q
from firm.store import schema
from firm.store.retry import retrying
from firm.store.rows import task_from_row
from firm.store.tree import TaskTree

E = schema.events
NOTES_SHOWN = 50  # the latest notes of a task a brief (or a listing) shows

# A task's latest notes, newest first: a seek on events (task_id, kind), read before a
# session unless the engine knows the task has none (engine/notewatch.py).
TASK_NOTES = (
    select(E.c.seq, E.c.ts, E.c.data)
    .where(E.c.task_id == bindparam("task_id"), E.c.kind == str(EventKind.NOTE))
    .order_by(E.c.seq.desc())
    .limit(bindparam("p_limit"))
)


@dataclass(frozen=True)
class Note:
    seq: int
    task_id: str
    by: str
    text: str
    at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "task_id": self.task_id,
            "by": self.by,
            "text": self.text,
            "at": self.at,
        }


class Notes(TaskTree):
    @retrying
    def add_note(self, task_id: str, by: str, text: str) -> Note:
        """Leave a note on a task (any status). TaskNotFound for an unknown task; BadText for
        an empty or over-long note."""
        text = person_text(text, "note")
        by = person_name(by)
        with self._write() as tx:
            row = tx.conn.execute(Q.TASK, {"id": task_id}).first()
            if row is None:
                raise TaskNotFound(task_id)
            tx.emit(EventKind.NOTE, task_from_row(row), by=by, text=text)
        e = tx.appended[-1]
        return Note(e.seq, task_id, by, text, e.ts)

    @retrying
    def notes(self, task_id: str, limit: int = NOTES_SHOWN) -> list[Note]:
        """The task's latest notes, oldest first."""
        rows = self._select(TASK_NOTES, {"task_id": task_id, "p_limit": limit}).all()
        out = []
        for seq, ts, data in reversed(rows):
            d = _loads(data)
            out.append(Note(seq, task_id, str(d.get("by", "?")), str(d.get("text", "")), ts))
        return out


def _loads(data: str) -> dict[str, Any]:
    value = json.loads(data)
    return value if isinstance(value, dict) else {}
