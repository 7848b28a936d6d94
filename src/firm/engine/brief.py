"""The brief: what an agent is told about its task at the start of a session."""

from __future__ import annotations

from collections.abc import Sequence

from firm.org import OrgChart
from firm.store.approvals import ASK_HUMAN, PENDING, Approval, approval_outcome
from firm.store.notes import Note
from firm.store.questions import ANSWERED, Question
from firm.tasks import Status, Task

RESULT_LIMIT = 2000  # characters of a report's result shown to its manager; files hold the rest


def bounded(text: str | None, limit: int = RESULT_LIMIT) -> str:
    text = (text or "").strip()
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f" … [{len(text) - limit} more characters; see the files]"


def describe_subtask(t: Task) -> str:
    head = f"- [{t.id}] {t.title} (assigned to {t.assignee}) → {t.status}"
    if t.status == Status.DONE:
        lines = [head, "  result: " + bounded(t.result).replace("\n", "\n  ")]
        if t.files:
            lines.append("  files: " + ", ".join(t.files))
        return "\n".join(lines)
    if t.status in (Status.FAILED, Status.CANCELLED):
        return f"{head}\n  reason: {bounded(t.error, 500) or 'no reason given'}"
    return head


def describe_approvals(task: Task, approvals: Sequence[Approval]) -> list[str]:
    """The calls of the last turn that waited for a person, and how each came out."""
    recent = [
        a
        for a in approvals
        if a.turn >= task.turn - 1 and a.status != PENDING and a.tool != ASK_HUMAN
    ]
    if not recent:
        return []
    lines = ["Calls you made that waited for a person's approval:"]
    for a in recent:
        outcome = bounded(approval_outcome(a)).replace("\n", "\n  ")
        lines.append(f"- [{a.id}] {a.tool}({a.summary}) → {a.status}\n  {outcome}")
    lines.append(
        "An approved call has already run, once, with the arguments that were approved; do "
        "not call it again. For a denied one, act on the reason."
    )
    return ["\n".join(lines)]


def describe_questions(task: Task, questions: Sequence[Question]) -> list[str]:
    """The questions of the last turn a person answered: each answer is its ask_human call's
    result."""
    recent = [q for q in questions if q.turn >= task.turn - 1 and q.status == ANSWERED]
    if not recent:
        return []
    lines = ["You asked a person (ask_human), and they answered:"]
    for q in recent:
        asked = bounded(q.question, 500).replace("\n", "\n  ")
        answer = bounded(q.answer).replace("\n", "\n  ")
        lines.append(f"- [{q.id}] you asked: {asked}\n  {q.answered_by} answered: {answer}")
    lines.append("Each answer is the result of your ask_human call; go on with your task.")
    return ["\n".join(lines)]


def describe_notes(notes: Sequence[Note]) -> list[str]:
    """Notes people left on the task (the latest few), oldest first."""
    if not notes:
        return []
    lines = ["Notes people left on this task (take them into account):"]
    for n in notes:
        lines.append(f"- from {n.by}: " + bounded(n.text).replace("\n", "\n  "))
    return ["\n".join(lines)]


def build_brief(
    task: Task,
    org: OrgChart,
    subtasks: list[Task],
    approvals: Sequence[Approval] = (),
    *,
    questions: Sequence[Question] = (),
    notes: Sequence[Note] = (),
) -> str:
    """The brief for a session of `task`; `subtasks` are all the tasks it ever delegated,
    `approvals` the calls it made that waited for a person, `questions` those it asked one,
    `notes` what people left on it."""
    who = org.agent(task.created_by).name if org.has_agent(task.created_by) else task.created_by
    parts = [f"Task {task.id}: {task.title}"]
    if task.description and task.description.strip() != task.title.strip():
        parts.append(task.description.strip())
    parts.append(f"From: {who} · priority: {task.priority} · language: {task.language}")
    if task.language != "en":
        parts.append(f"Work and write your result in this language: {task.language}.")

    earlier = [t for t in subtasks if t.status.terminal]
    current_turn = [t for t in subtasks if not t.status.terminal]
    if task.turn > 0 and subtasks:
        parts.append("Your reports have finished the subtasks you delegated:")
        parts.extend(describe_subtask(t) for t in earlier)
        if current_turn:
            # Only a session re-run after an interruption sees open subtasks on waking.
            parts.append(
                "Already delegated in this turn, still open (before an interruption); do not "
                "hand the same work out again:"
            )
            parts.extend(describe_subtask(t) for t in current_turn)
        parts.append(
            "Merge these results into your own deliverable and finish with "
            "complete_task (or fail_task if the task cannot be done), or delegate "
            "more work and end your turn."
        )
    elif subtasks:
        # A session of this turn was interrupted after delegating: show what already exists.
        parts.append(
            "You already delegated these subtasks in this turn (before an "
            "interruption); do not hand the same work out again:"
        )
        parts.extend(describe_subtask(t) for t in subtasks)
        parts.append("Delegate only what is missing, then end your turn.")
    parts.extend(describe_approvals(task, approvals))
    parts.extend(describe_questions(task, questions))
    parts.extend(describe_notes(notes))
    return "\n\n".join(parts)
