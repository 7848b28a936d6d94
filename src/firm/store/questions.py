"""Questions: an agent asks a person (`ask_human`), and its task waits for the answer.

A question is a kind of pending request, so it lives where the other kind — a call waiting
for approval — lives: a row of the approvals table whose tool is `ask_human`, with the
question as its arguments. That gives it the same wait for free: the wake rule and recovery
leave a task `waiting` while a row of it is pending, an answer wakes the task in the
transaction that records it, and cancelling the task withdraws it. Only its own life differs:
pending → answered (the answer is the tool's result, in the agent's next brief) | withdrawn;
it is never claimed or run. `approvals()` and `decide_approval` leave these rows alone.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, bindparam, select, update
from sqlalchemy.exc import IntegrityError

from firm.errors import AlreadyDecided, FirmError, TaskNotFound, TaskNotHeld
from firm.events import EventKind
from firm.people import person_name, person_text
from firm.store import schema
from firm.store.approvals import (
    ASK_HUMAN,
    PENDING,
    WITHDRAWN,
    Approval,
    Approvals,
    approval_from_row,
)
from firm.store.base import PendingEvents
from firm.store.prepared import run
from firm.store.retry import retrying
from firm.store.transaction import Tx
from firm.tasks import Status

A = schema.approvals

ANSWERED = "answered"
QUESTION_STATUSES = (PENDING, ANSWERED, WITHDRAWN)

# Every request of one task, calls and questions alike (one table), in the order asked.
TASK_REQUESTS = (
    select(A)
    .where(A.c.task_id == bindparam("task_id"))
    .order_by(A.c.requested_at, A.c.id)
    .limit(bindparam("p_limit"))
)


class QuestionNotFound(FirmError):
    def __init__(self, question_id: str):
        self.question_id = question_id
        super().__init__(f"no question with id {question_id!r}")


class AlreadyAnswered(AlreadyDecided):
    """A second answer (or an answer to a withdrawn question): refused, the first stands."""


@dataclass(frozen=True)
class Question:
    id: str
    root_id: str
    task_id: str
    agent: str
    turn: int
    question: str
    status: str  # pending | answered | withdrawn
    asked_at: float
    answered_at: float | None
    answered_by: str | None
    answer: str | None  # the answer; for a withdrawn question, why

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task_id": self.task_id,
            "root_id": self.root_id,
            "agent": self.agent,
            "question": self.question,
            "status": self.status,
            "asked_at": self.asked_at,
            "answered_at": self.answered_at,
            "answered_by": self.answered_by,
            "answer": self.answer,
        }


def question_from_row(row: Row[Any]) -> Question:
    m = row._mapping
    args = json.loads(m["args"])
    return Question(
        id=m["id"],
        root_id=m["root_id"],
        task_id=m["task_id"],
        agent=m["agent"],
        turn=m["turn"],
        question=str(args.get("question", "")) if isinstance(args, dict) else "",
        status=m["status"],
        asked_at=m["requested_at"],
        answered_at=m["decided_at"],
        answered_by=m["decided_by"],
        answer=m["note"],
    )


def question_outcome(q: Question) -> str:
    """What the agent's ask_human call comes to: the answer, or why there is none."""
    if q.status == ANSWERED:
        return q.answer or ""
    if q.status == WITHDRAWN:
        return f"error: your question {q.id} was withdrawn ({q.answer or 'the task was cancelled'})"
    return f"your question {q.id} waits for a person's answer"


def _new_question_id() -> str:
    return "Q-" + secrets.token_hex(4)


class Questions(Approvals):
    @retrying
    def ask_question(
        self, task_id: str, worker_id: str, question: str, events: PendingEvents = ()
    ) -> Question:
        """Record a question the task's agent asks a person, or return the one this turn
        already asked in the same words (a re-run of an interrupted session asks once)."""
        question = person_text(question, "question")
        for _ in range(2):
            try:
                with self._write() as tx:
                    task = self._lock_task(tx, task_id)
                    if task is None:
                        raise TaskNotFound(task_id)
                    tx.pending.extend(events)
                    key_src = f"{task_id}\x00{task.turn}\x00{ASK_HUMAN}\x00{question}"
                    key = hashlib.sha256(key_src.encode()).hexdigest()[:40]
                    row = tx.conn.execute(select(A).where(A.c.dedupe_key == key)).first()
                    if row is not None:
                        return question_from_row(row)
                    if task.status != Status.IN_PROGRESS or task.worker_id != worker_id:
                        raise TaskNotHeld(
                            f"task {task_id} is no longer this session's; the question is not asked"
                        )
                    args = json.dumps({"question": question}, ensure_ascii=False)
                    values = {
                        "id": _new_question_id(),
                        "root_id": task.root_id,
                        "task_id": task_id,
                        "agent": task.assignee,
                        "turn": task.turn,
                        "tool": ASK_HUMAN,
                        "args": args,
                        "args_digest": hashlib.sha256(args.encode()).hexdigest(),
                        "summary": question[:200],
                        "rule": "ask_human",
                        "status": PENDING,
                        "dedupe_key": key,
                        "requested_at": tx.now,
                        "timeout_at": None,
                    }
                    row = tx.conn.execute(A.insert().values(values).returning(*A.c)).one()
                    asked = question_from_row(row)
                    tx.emit(EventKind.QUESTION_ASKED, task, id=asked.id, question=question)
                return asked
            except IntegrityError:
                continue  # the same question committed first: read it
        with self._read() as conn:
            return question_from_row(conn.execute(select(A).where(A.c.dedupe_key == key)).one())

    @retrying
    def answer_question(self, question_id: str, by: str, answer: str) -> Question:
        """Answer a waiting question, waking its task if nothing else holds it. A second
        answer raises AlreadyAnswered: the first one stands."""
        answer = person_text(answer, "answer")
        by = person_name(by)
        with self._read() as conn:
            head = conn.execute(
                select(A.c.task_id).where(A.c.id == question_id, A.c.tool == ASK_HUMAN)
            ).first()
        if head is None:
            raise QuestionNotFound(question_id)
        with self._write() as tx:
            self._lock_family(tx, head[0])  # the task's row: the wake is decided under it
            row = tx.conn.execute(
                update(A)
                .where(A.c.id == question_id, A.c.status == PENDING)
                .values(
                    status=ANSWERED,
                    decided_at=tx.now,
                    decided_by=by,
                    note=answer,
                    result=answer,
                    ok=True,
                )
                .returning(*A.c)
            ).first()
            if row is None:
                current = question_from_row(
                    tx.conn.execute(select(A).where(A.c.id == question_id)).one()
                )
                raise AlreadyAnswered(
                    f"question {question_id} was already {current.status}"
                    + (f" by {current.answered_by}" if current.answered_by else "")
                    + "; the first answer stands"
                )
            answered = question_from_row(row)
            tx.emit(
                EventKind.QUESTION_ANSWERED,
                answered.task_id,
                answered.agent,
                id=question_id,
                by=by,
                answer=answer,
            )
            self._wake_if_done(tx, answered.task_id)
        return answered

    def _withdraw(self, tx: Tx, task_ids: list[str], by: str) -> None:
        """Within a cancel or revoke: the cancelled tasks' waiting questions are withdrawn
        (with an entry of their own), then their waiting calls (Approvals._withdraw)."""
        if task_ids:
            reason = "the task was cancelled"
            rows = tx.conn.execute(
                update(A)
                .where(A.c.task_id.in_(task_ids), A.c.tool == ASK_HUMAN, A.c.status == PENDING)
                .values(status=WITHDRAWN, decided_at=tx.now, decided_by=by, note=reason)
                .returning(A.c.id, A.c.task_id, A.c.agent)
            ).all()
            for qid, tid, agent in sorted(rows):
                tx.emit(EventKind.QUESTION_WITHDRAWN, tid, agent, id=qid, by=by, reason=reason)
        super()._withdraw(tx, task_ids, by)

    @retrying
    def questions(
        self,
        *,
        status: str | None = None,
        task_id: str | None = None,
        root_id: str | None = None,
        limit: int = 1000,
    ) -> list[Question]:
        q = select(A).where(A.c.tool == ASK_HUMAN)
        if status is not None:
            q = q.where(A.c.status == status)
        if task_id is not None:
            q = q.where(A.c.task_id == task_id)
        if root_id is not None:
            q = q.where(A.c.root_id == root_id)
        q = q.order_by(A.c.requested_at, A.c.id).limit(limit)
        with self._read() as conn:
            return [question_from_row(r) for r in conn.execute(q)]

    @retrying
    def requests(self, task_id: str, limit: int = 1000) -> tuple[list[Approval], list[Question]]:
        """The task's calls that waited for a person (as approvals(task_id=…) lists them)
        and its questions (as questions(task_id=…) does), in one read: what a session's
        brief needs of both."""
        with self._read() as conn:
            rows = run(conn, TASK_REQUESTS, {"task_id": task_id, "p_limit": 2 * limit}).all()
        calls = [approval_from_row(r) for r in rows if r.tool != ASK_HUMAN]
        asked = [question_from_row(r) for r in rows if r.tool == ASK_HUMAN]
        return calls[:limit], asked[:limit]

    @retrying
    def get_question(self, question_id: str) -> Question:
        with self._read() as conn:
            row = conn.execute(
                select(A).where(A.c.id == question_id, A.c.tool == ASK_HUMAN)
            ).first()
        if row is None:
            raise QuestionNotFound(question_id)
        return question_from_row(row)
