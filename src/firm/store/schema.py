"""The tables, in SQLAlchemy Core, shared by every backend.

SCHEMA_VERSION is bumped with every change to what is persisted; a store written by a newer
firm refuses to open with an older one instead of misreading it. The tables are created and
changed only by the Alembic migrations in store/migrations (see store/migrate.py); this module
is the current shape, and a test checks that the migrations produce exactly it.

Versions:
  1. runs, tasks (with grant, lease and usage columns), events (hash-chained), chain_head, meta.
     Revision 0002 adds the approvals table (older firms refuse the newer revision).
     Revision 0003 adds tasks.held_by_plan (a subtask waiting for its plan's approval).
     Revision 0004 reshapes indexes so every hot statement is a seek, whatever the store's
     size: tasks (parent_id, status), (root_id, status) and the claim order in full; events
     (task_id, kind); approvals (task_id, status).
     Revision 0005 adds tasks.cancelled_by_seq: a cancel writes one `cancelled` entry on its
     subtree's root, and each task it ended names that entry's seq (store/cancel.py).
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

SCHEMA_VERSION = 1
# The Alembic revision (store/migrations/versions) these tables correspond to. A migration that
# changes them bumps both this and, if what is persisted changes meaning, SCHEMA_VERSION.
HEAD_REVISION = "0005"

metadata = MetaData()

# One row per goal submitted: what the run needs to resume with nothing but the database.
runs = Table(
    "runs",
    metadata,
    Column("id", String(32), primary_key=True),  # the root task's id
    Column("org_yaml", Text, nullable=False),
    Column("org_source", Text, nullable=False),  # the file it was loaded from, for messages
    Column("brain", String(64), nullable=False),
    Column("brain_options", Text, nullable=False),  # JSON
    Column("workspace", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)

tasks = Table(
    "tasks",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("root_id", String(32), nullable=False),
    Column("parent_id", String(32)),
    Column("title", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("assignee", String(64), nullable=False, index=True),
    Column("created_by", String(64), nullable=False),
    Column("priority", Integer, nullable=False),
    Column("language", String(16), nullable=False),
    Column("result", Text),
    Column("files", Text, nullable=False, default="[]"),  # JSON list of workspace paths
    Column("error", Text),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("started_at", Float),
    Column("finished_at", Float),
    # How many sessions of this task ended their turn after delegating. Delegation is idempotent
    # per (parent, turn, assignee, normalised title): a re-run of an interrupted session replays
    # the same turn and gets the existing subtasks back; a manager woken for a new turn may hand
    # out the same title again on purpose (a retry).
    Column("turn", Integer, nullable=False, default=0),
    Column("attempts", Integer, nullable=False, default=0),
    Column("dedupe_key", String(64), unique=True),
    Column("grant", Text),  # JSON; the authority the task runs under
    Column("revoked", Boolean, nullable=False, default=False),
    Column("worker_id", String(128)),
    Column("lease_expires_at", Float),
    Column("calls", Integer, nullable=False, default=0),
    Column("prompt_tokens", Integer, nullable=False, default=0),
    Column("completion_tokens", Integer, nullable=False, default=0),
    # The plan (an approval) a delegated subtask waits for; set, it is not claimed. Cleared in
    # the transaction that approves the plan (store/plans.py).
    Column("held_by_plan", String(32), index=True),
    # The seq of the one `cancelled` entry that ended this task with its whole subtree: the
    # entry lists only how many and a digest, so the tasks it ended are found here.
    Column("cancelled_by_seq", Integer, index=True),
    # With the status in the index, "has this task (or run) open work" is a seek, not a walk
    # over every sibling: the wake rule runs at every settle, and a manager may have
    # thousands of reports. Lookups by parent or run alone use the same indexes' prefix.
    Index("ix_tasks_parent_status", "parent_id", "status"),
    Index("ix_tasks_root_status", "root_id", "status"),
)
# The claim order exactly (priority high first, then oldest): the next tasks to claim are the
# first entries, not the result of sorting every todo task on each claim.
Index("ix_tasks_claim", tasks.c.status, tasks.c.priority.desc(), tasks.c.created_at, tasks.c.id)

# The activity log and the audit trail are one append-only table. seq is assigned under the
# chain head's lock, so sequence numbers have no gaps and follow commit order on every backend.
events = Table(
    "events",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("ts", Float, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("task_id", String(32)),
    Column("agent", String(64)),
    Column("data", Text, nullable=False),  # canonical JSON, exactly as hashed
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    # A task's entries (by task alone: its prefix), and of them one kind, newest first: a
    # brief's notes are a seek, not a walk over everything the task ever logged.
    Index("ix_events_task_kind", "task_id", "kind"),
)

chain_head = Table(
    "chain_head",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seq", Integer, nullable=False),
    Column("hash", String(64), nullable=False),
)

meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

# A tool call that waits for a person: its exact canonical arguments, the decision, and, once
# approved, the single run of its body (claimed before the body starts, so a crash during it is
# reported as "may have run" rather than run twice).
approvals = Table(
    "approvals",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("root_id", String(32), nullable=False, index=True),
    Column("task_id", String(32), nullable=False),
    Column("agent", String(64), nullable=False),
    Column("turn", Integer, nullable=False),  # the task's turn that asked
    Column("tool", String(200), nullable=False),
    Column("args", Text, nullable=False),  # canonical JSON, exactly as approved
    Column("args_digest", String(64), nullable=False),
    Column("summary", Text, nullable=False),
    Column("rule", String(200), nullable=False),
    # pending → approved | denied | timed_out | withdrawn; approved → running → ran | interrupted
    Column("status", String(16), nullable=False),
    Column("dedupe_key", String(64), unique=True),
    Column("requested_at", Float, nullable=False),
    Column("timeout_at", Float),
    Column("decided_at", Float),
    Column("decided_by", String(200)),
    Column("note", Text),
    Column("claimed_by", String(128)),
    Column("result", Text),
    Column("ok", Boolean),
    Index("ix_approvals_status", "status", "timeout_at"),
    # A task's requests, and of them the pending ones (the wake rule asks at every settle).
    Index("ix_approvals_task_status", "task_id", "status"),
)
