"""A session's opening: what happens between the claim and the brain's first step.

Approved calls run first, once, with the arguments a person approved; calls an earlier session
left unanswered are answered as interrupted; then the brief tells the agent all of it, with
its reports' results, its questions' answers and the notes people left. Most sessions are a
leaf's first: it has asked nothing and has no reports, so most of this reads nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from firm.engine.approved import run_approved
from firm.engine.brief import build_brief
from firm.engine.interrupted import answer_interrupted, describe_interrupted
from firm.engine.notewatch import NoteWatch
from firm.org import OrgChart
from firm.session import Session
from firm.store.approvals import APPROVED, RUNNING

# Approval states a session start acts on: approved (claim and run), running (a claim an
# earlier session left without a result: marked interrupted).
CLAIMABLE = (APPROVED, RUNNING)


def open_session(
    session: Session, org: OrgChart, first: bool, notewatch: NoteWatch
) -> Callable[[], str]:
    """Run what must run before the brain, and return the session's brief, as the function
    that writes it from what was read here (a brain that never reads it costs no text).
    `first`: the task's first session (engine/interrupted.py), which cannot have asked
    anything yet."""
    store, task = session.store, session.task
    # Most tasks never asked for a call: the engine's watch of its own commits knows it, else
    # a read settles it; only a task with calls to claim (or claims an earlier session left
    # unfinished) takes a write transaction.
    nothing_asked = first or notewatch.none_asked(task.id)
    asked, questions = ([], []) if nothing_asked else store.requests(task.id)
    if any(a.status in CLAIMABLE for a in asked):
        run_approved(session)
        asked, questions = store.requests(task.id)
    cut_off = answer_interrupted(store, task)
    # A person may leave one at any time; most tasks never have one.
    notes = [] if notewatch.none_for(task.id) else store.notes(task.id)
    subtasks = list(session.subtasks)

    def brief() -> str:
        text = build_brief(task, org, subtasks, asked, questions=questions, notes=notes)
        return "\n\n".join([text, *describe_interrupted(cut_off)])

    return brief
