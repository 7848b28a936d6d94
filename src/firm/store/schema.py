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
  2. Revision 0006: a `cancelled` entry may end a whole subtree (its meaning changed in 0005;
     the number says so from 0006 on, for firms that read only it). The indexes on status
     hold open tasks only (partial), so a task that ends leaves them instead of moving inside
     them; lookups by parent or run have plain indexes (a task's parent and run never
     change); cancelled_by_seq loses its index (a cancel's tasks are found down its subtree).
     Revision 0007: the index on held_by_plan holds only the tasks that name a plan (partial).
     Revision 0008: one index of open tasks, (status, root_id, parent_id), serves both what
     asks by run and what asks by parent (the open-children index is gone): a task's life,
     and a cancel, change one index entry less per task.
     Revision 0009: on SQLite the chain head is no longer a row every commit rewrites but a
     view of the log's last entry (one writer at a time holds the file, so the last entry is
     the head); a firm from before refuses to write such a store (it cannot update a view).
     PostgreSQL keeps its head row, whose lock orders concurrent commits.
"""

from __future__ import annotations

from typing import Any

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
    and_,
    literal_column,
    or_,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import CreateIndex
from sqlalchemy.sql.compiler import DDLCompiler
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import FromClause

from firm.chain import GENESIS
from firm.tasks import OPEN, Status

SCHEMA_VERSION = 2
# The Alembic revision (store/migrations/versions) these tables correspond to. A migration that
# changes them bumps both this and, if what is persisted changes meaning, SCHEMA_VERSION.
HEAD_REVISION = "0009"

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
    # the transaction that approves the plan (store/plans.py). Its index (below) holds only
    # the tasks that name one.
    Column("held_by_plan", String(32)),
    # The seq of the one `cancelled` entry that ended this task with its whole subtree: the
    # entry lists only how many and a digest, so the tasks it ended are found here (down the
    # subtree of the entry's task: no index, which every cancelled row would pay for).
    Column("cancelled_by_seq", Integer),
    # A task's children (and a run's roots, parent NULL) and a run's tasks: these never
    # change, so no status change touches them.
    Index("ix_tasks_parent_id", "parent_id"),
    Index("ix_tasks_root_id", "root_id"),
)


def status_is(status: ColumnElement[str], value: Status) -> ColumnElement[bool]:
    """status = 'value', the value written into the SQL: a partial index is used only when
    the planner sees that the query's terms imply the index's (a bound value hides it from
    PostgreSQL's generic plans, and makes SQLite prepare the statement again at every run)."""
    return status == literal_column(f"'{value}'")


def is_open(status: ColumnElement[str]) -> ColumnElement[bool]:
    """The task is open, as the open indexes' own predicate: a query that says so in these
    exact terms (or tests one open status, which implies them) may use them."""
    return or_(*(status_is(status, s) for s in sorted(OPEN)))


def claimable(t: FromClause) -> ColumnElement[bool]:
    """What a claim takes: todo and not held by a plan (the claim index's predicate)."""
    return and_(status_is(t.c.status, Status.TODO), t.c.held_by_plan.is_(None))


# The indexes on status hold open tasks only: a task that ends (a settle, or 10,000 at once
# in a cancel) is deleted from each instead of moved inside it, and ended tasks, the bulk of
# a store, are in none of them. Each is a seek for what asks about open work:
# - the claim order exactly (priority high first, then oldest): the next tasks to claim are
#   the first entries, not the result of sorting every todo task on each claim;
# - open tasks by status, run and parent: "has the run open work", the running count under
#   the store's cap, leases and recovery (by status, then run), and a task's open children
#   (the wake rule at every settle: a manager may have thousands of reports, and finished ones
#   are not walked over), asked with the parent's run beside its id — a child is in its
#   parent's run — so the open statuses, the run and the parent are one seek each. One index
#   for both, not one by parent and one by run: every task enters and leaves it once, and a
#   cancel deletes one entry less per task (callgrind, 10,001 tasks: SQLite's UPDATE 254 →
#   231 M instructions).
_OPEN = is_open(tasks.c.status)
Index(
    "ix_tasks_claim",
    tasks.c.status,
    tasks.c.priority.desc(),
    tasks.c.created_at,
    tasks.c.id,
    info={"where": claimable(tasks)},
)
Index("ix_tasks_open", tasks.c.status, tasks.c.root_id, tasks.c.parent_id, info={"where": _OPEN})
# A plan's held tasks: the few that name one (NULL on every other task, which nothing asks
# for by this index); `held_by_plan = :plan` implies the predicate on both backends.
Index(
    "ix_tasks_held_by_plan",
    tasks.c.held_by_plan,
    info={"where": tasks.c.held_by_plan.is_not(None)},
)


@compiles(CreateIndex)
def _partial_index(create: CreateIndex, compiler: DDLCompiler, **kw: Any) -> str:
    """A partial index's WHERE, from its `info` (the same SQL on SQLite and PostgreSQL).
    Not `sqlite_where`/`postgresql_where`: naming a dialect's option loads that dialect, and
    a SQLite store has no use for PostgreSQL's (tests/test_import_light.py)."""
    sql = compiler.visit_create_index(create, **kw)
    where = create.element.info.get("where") if isinstance(create.element, Index) else None
    if where is None:
        return sql
    predicate = compiler.sql_compiler.process(where, include_table=False, literal_binds=True)
    return f"{sql} WHERE {predicate}"


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

# The head of the chain: the last entry's seq and hash (0 and GENESIS before the first). A row
# on PostgreSQL, moved by every commit under its lock (which orders commits). On SQLite a view
# of the last entry (revision 0009): the write transaction holds the whole file, so the last
# entry is the head, and a commit writes its entries only (store/transaction.py). Reads of
# the head are the same statements on both.
chain_head = Table(
    "chain_head",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seq", Integer, nullable=False),
    Column("hash", String(64), nullable=False),
)
SQLITE_CHAIN_HEAD_VIEW = (
    "CREATE VIEW chain_head (id, seq, hash) AS SELECT 1,"
    " coalesce((SELECT max(events.seq) FROM events), 0),"
    " coalesce((SELECT events.hash FROM events"
    " WHERE events.seq = (SELECT max(events.seq) FROM events)),"
    f" '{GENESIS}')"
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
