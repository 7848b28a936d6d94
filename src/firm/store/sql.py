"""The store over SQLAlchemy Core: one code path for SQLite (embedded) and PostgreSQL.

Every write is one short transaction. On SQLite it starts with BEGIN IMMEDIATE (the single
writer lock, taken up front so two writers never deadlock on lock upgrade); on PostgreSQL the
rows that matter are locked explicitly, always ancestors before descendants, and the chain head
last, right before commit — so no lock cycle can form. Every public method is one transaction
and is re-run on a transient database error (store/retry.py); on PostgreSQL each commit that
appends events also sends a NOTIFY (store/notify.py), so other machines hear of it at once.

SqlStore is composed of one part per concern, each a module of its own:

- connection.py  the engine, the schema check, the read and write transactions, listeners
- tree.py        a task with its family or subtree under the lock order; the wake rule
- runspecs.py    creating a run and its root task; reading a run back
- delegation.py  delegate, settle (done, failed, yielded) and usage
- leases.py      claims, leases, release, recovery and the store-wide cap
- cancel.py      cancel and revoke over a subtree (withdrawing their waiting approvals)
- approvals.py   calls that wait for a person: request, decide, expire, claim, finish
- questions.py   an agent's questions to a person (rows beside the approvals): ask, answer
- notes.py       notes people leave on tasks (entries of the log)
- eventlog.py    appending to the event log, reading it, waiting for it, its head
- reads.py       tasks, lineage, children, subtrees, listings, counts
- checked.py     a tool call's check and its record, in one write
"""

from __future__ import annotations

from firm.store.cancel import Cancellation
from firm.store.checked import CheckedWrites
from firm.store.connection import sqlite_url
from firm.store.delegation import Delegation
from firm.store.eventlog import EventLog
from firm.store.leases import Leases
from firm.store.notes import Notes
from firm.store.questions import Questions
from firm.store.reads import Reads
from firm.store.runspecs import Runs


class SqlStore(
    Runs, Delegation, Leases, Questions, Notes, Cancellation, CheckedWrites, EventLog, Reads
):
    """The Store protocol over SQLAlchemy Core."""


__all__ = ["SqlStore", "sqlite_url"]
