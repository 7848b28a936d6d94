"""One session on its worker thread, from its company to its outcome: the Session built and
opened (engine/opening.py), the brain's turn, and what the settle is to write after it
(engine/leftover.py). What the thread does with the outcome (the settle, the slot it frees, the
task a settle hands it next) is the scheduler's (engine/scheduler.py)."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from firm.engine.interrupted import is_first_session
from firm.engine.leftover import Pending, leftover
from firm.engine.opening import open_session
from firm.session import Session, SessionCancelled
from firm.store.base import SettleResult
from firm.store.retry import StoreUnavailable
from firm.tasks import Outcome, Task

if TYPE_CHECKING:
    from firm.engine.scheduler import Engine

log = logging.getLogger("firm.engine")

# The subtasks a session's task was woken with, if its waking settle read them.
Reports = list[Task] | None
Ran = tuple[Outcome | None, Pending, SettleResult | None]  # a session's end (run_session)


def run_session(
    engine: Engine, task: Task, cancel: threading.Event, subtasks: Reports, stop: threading.Event
) -> Ran:
    """Run the session. Returns its outcome (None: it was cancelled, or the worker is
    stopping and hands the task back), the log entries left for the settle to write, and
    the settle already written with its last delegations (firm/turnend.py), if it was."""
    try:
        company = engine.company(task.root_id)
    except StoreUnavailable:
        raise
    except Exception as exc:
        failed = Outcome.failed(f"the company of run {task.root_id} cannot start: {exc}")
        return failed, [], None
    session: Session | None = None
    outcome: Outcome | None
    try:
        # A first session has nothing of its own to read yet (is_first_session): most
        # tasks are leaves, run once, so this skips three reads for most sessions.
        first = is_first_session(task)
        subtasks = [] if first else subtasks or engine.store.children(task.id)
        session = Session(
            store=engine.store,
            company=company,
            task=task,
            subtasks=subtasks,
            brief="",
            cancel_event=cancel,
            worker_id=engine.worker_id,
            revoke=engine.revoke,
            clock=engine.clock,
            lineages=engine.lineages,
        )
        session.write_delegations = engine.delegations  # engine/delegated.py
        session.brief = open_session(session, company.org, first, engine.notewatch)
        text = company.brain_for(task.assignee).run(session)
        stopping = cancel.is_set() and stop.is_set()
        outcome = None if stopping else session.final_outcome(text)
    except SessionCancelled:
        outcome = None
    except StoreUnavailable:
        raise
    except Exception as exc:
        log.exception("session of %s crashed", task.id)
        outcome = Outcome.failed(f"{task.assignee}'s session crashed: {type(exc).__name__}: {exc}")
    return (outcome, *leftover(engine.store, session, outcome, task.id))
