"""The statements on the engine's hot path, built once with named parameters.

Building a SQLAlchemy statement costs several times more than running a prepared one (a
cached statement object keeps its compiled form and cache key), and a session runs dozens
of these. Statements that vary in shape (IN lists, filters a caller may leave out) are
built where they are used, in the store's parts (runs.py, leases.py, reads.py, …).
"""

from __future__ import annotations

from sqlalchemy import (
    Integer,
    bindparam,
    cast,
    exists,
    func,
    insert,
    literal,
    literal_column,
    null,
    or_,
    select,
    true,
    update,
)

from firm.store import schema
from firm.tasks import OPEN, Status

T = schema.tasks
E = schema.events
HEAD = schema.chain_head
A = schema.approvals
OPEN_VALUES = [str(s) for s in OPEN]


# The open statuses in the open indexes' own terms (store/schema.py): a fixed SQL string, so
# the statement can take the prepared path, and the planner sees the partial index applies.
is_open = schema.is_open


# --- tasks by id -------------------------------------------------------------------------------

TASK = select(T).where(T.c.id == bindparam("id"))
TASK_FOR_UPDATE = TASK.with_for_update()
PARENT_OF = select(T.c.parent_id).where(T.c.id == bindparam("id"))
SESSION_STATE = select(T.c.status, T.c.revoked, T.c.worker_id).where(T.c.id == bindparam("id"))
BY_DEDUPE_KEY = select(T).where(T.c.dedupe_key == bindparam("key"))
CHILDREN = select(T).where(T.c.parent_id == bindparam("id")).order_by(T.c.created_at, T.c.id)
PENDING_APPROVALS = (
    select(func.count())
    .select_from(A)
    .where(A.c.task_id == bindparam("id"), A.c.status == "pending")
)
# A task's open children, with its run: a seek on the open index (status, run, parent).
_R = T.alias("r")
_RUN_OF = select(_R.c.root_id).where(_R.c.id == bindparam("id"))
OPEN_CHILDREN = (
    select(func.count())
    .select_from(T)
    .where(
        T.c.parent_id == bindparam("id"),
        T.c.root_id == _RUN_OF.scalar_subquery(),
        is_open(T.c.status),
    )
)
# Has the run anything a worker can still take or is running? (Not: waiting tasks, which
# wait for those; todo tasks held by a plan, which wait for a person.) A seek on
# (root_id, status): the answer costs the same in a run of ten tasks or of a million.
OPEN_WORK = select(
    exists().where(
        T.c.root_id == bindparam("root_id"),
        T.c.status.in_([literal(str(Status.TODO)), literal(str(Status.IN_PROGRESS))]),
        or_(T.c.status == str(Status.IN_PROGRESS), T.c.held_by_plan.is_(None)),
        is_open(T.c.status),  # open tasks by status and run: ix_tasks_open
    )
)


def _lineage():  # type: ignore[no-untyped-def]
    """A task and its ancestors, nearest first: one recursive CTE (it runs before every
    tool call)."""
    base = select(T.c.id.label("id"), literal(0).label("depth")).where(
        T.c.id == bindparam("task_id")
    )
    up = base.cte("lineage", recursive=True)
    p = T.alias("p")
    up = up.union_all(
        select(p.c.parent_id, (up.c.depth + 1)).where(p.c.id == up.c.id, p.c.parent_id.is_not(None))
    )
    # The log head rides along in the same statement, so it is read in the same snapshot as
    # the rows: a revocation missing from them is one committed after that head.
    head = select(HEAD.c.seq).where(HEAD.c.id == 1).scalar_subquery().label("head_seq")
    return select(T, head).join(up, up.c.id == T.c.id).order_by(up.c.depth)


LINEAGE = _lineage()

# --- writes --------------------------------------------------------------------------------

# The hot UPDATEs of tasks run OR FAIL on SQLite. SQLite keeps a statement journal (a copy
# of each page the statement changes, to undo that statement alone) for one that may change
# several rows (a claim's `id IN` the queue's head) or has a RETURNING (run as a trigger),
# and may abort on a constraint (the NOT NULL columns they set). Nothing needs that undo: an
# error in any of them fails its whole write, which is rolled back, as the cancel's UPDATE
# reasons (store/cancel.py); and a statement that changes one row has nothing of its own to
# undo (a row's constraints are checked before it is written). Callgrind, each in its own
# transaction: a claim of the queue's head 239.0 -> 234.5 k instructions, a settle 183.3 ->
# 179.3 k.
UPDATE_TASKS = update(T).prefix_with("OR FAIL", dialect="sqlite")

# Every column but the id is a parameter named after it, prefixed (UPDATE and INSERT reserve
# the bare column names for themselves).
INSERT_TASK = insert(T).values({c.name: bindparam(f"p_{c.name}") for c in T.c}).returning(*T.c)


def _released(now: str = "p_now") -> dict[str, object]:
    # NULL in the SQL, not a bound None (sqlite3's adapter lookup, ~3 k instructions each).
    return {"worker_id": null(), "lease_expires_at": null(), "updated_at": bindparam(now)}


SETTLE_ENDED = (
    UPDATE_TASKS.where(T.c.id == bindparam("p_id"))
    .values(
        status=bindparam("p_status"),
        result=bindparam("p_result"),
        error=bindparam("p_error"),
        files=bindparam("p_files"),
        finished_at=bindparam("p_now"),
        **_released(),
    )
    .returning(*T.c)
)

SETTLE_YIELDED = (
    UPDATE_TASKS.where(T.c.id == bindparam("p_id"))
    .values(status=bindparam("p_status"), turn=T.c.turn + 1, **_released())
    .returning(*T.c)
)


def nothing_pending(task_id):  # type: ignore[no-untyped-def]
    """The second half of the wake rule: no call of the task waits for a person."""
    return ~exists().where(A.c.task_id == task_id, A.c.status == "pending")


def _wake():  # type: ignore[no-untyped-def]
    """The wake rule as one statement: a waiting task with no open subtask and no call
    waiting for a person goes to todo."""
    c = T.alias("c")
    return (
        UPDATE_TASKS.where(
            T.c.id == bindparam("p_parent"),
            T.c.status == str(Status.WAITING),
            ~exists().where(
                c.c.parent_id == bindparam("p_parent"),
                c.c.root_id == T.c.root_id,  # the open index's (status, run, parent)
                is_open(c.c.status),
            ),
            nothing_pending(bindparam("p_parent")),
        )
        .values(status=str(Status.TODO), updated_at=bindparam("p_now"))
        .returning(T.c.id, T.c.assignee)
    )


WAKE = _wake()


def _wake_due():  # type: ignore[no-untyped-def]
    """WAKE's rule for the parent of the row an UPDATE … RETURNING changes (a settle), that row
    left out of its open subtasks: true when that parent waits, no other subtask of it is open
    and no call of it waits for a person. A settle reads it in its own statement and runs WAKE
    only when it holds, so the settles that wake nothing (every report's but the last) cost
    one statement less. Spelled in SQL: SQLAlchemy's SQLite compiler drops the table names
    in a RETURNING clause, which the correlation to the changed row needs."""
    t, a = T.name, A.name
    # the open index's own predicate (schema.is_open) and the run, a sibling's: a seek on
    # (status, run, parent); an IN list walks every sibling
    open_ = " OR ".join(f"wc.status = '{v}'" for v in sorted(OPEN_VALUES))
    return literal_column(
        f"EXISTS (SELECT 1 FROM {t} AS wp WHERE wp.id = {t}.parent_id"
        f" AND wp.status = '{Status.WAITING}'"
        f" AND NOT EXISTS (SELECT 1 FROM {t} AS wc WHERE wc.parent_id = {t}.parent_id"
        f" AND wc.root_id = {t}.root_id AND ({open_}) AND wc.id != {t}.id)"
        f" AND NOT EXISTS (SELECT 1 FROM {a} WHERE {a}.task_id = {t}.parent_id"
        f" AND {a}.status = 'pending'))"
    ).label("wake_due")


WAKE_DUE = _wake_due()

CLAIM_PICK = (
    select(T.c.id)
    .where(schema.claimable(T))  # todo, not waiting for a plan: the claim index's own terms
    .order_by(T.c.priority.desc(), T.c.created_at, T.c.id)
    .limit(bindparam("p_limit"))
)
CLAIM_PICK_SKIP_LOCKED = CLAIM_PICK.with_for_update(skip_locked=True)
# What every claim sets: the session's worker and lease, one more attempt, the start time.
CLAIMED = {
    "status": str(Status.IN_PROGRESS),
    "worker_id": bindparam("p_worker"),
    "lease_expires_at": bindparam("p_lease"),
    "attempts": T.c.attempts + 1,
    "started_at": func.coalesce(T.c.started_at, bindparam("p_now")),
    "updated_at": bindparam("p_now"),
}
CLAIM = (
    UPDATE_TASKS.where(
        T.c.id.in_(bindparam("p_ids", expanding=True)),
        T.c.status == str(Status.TODO),
        T.c.held_by_plan.is_(None),
    )
    .values(CLAIMED)
    .returning(*T.c)
)
# SQLite: pick and claim in one statement (the write transaction holds the whole file, so
# nothing can take the picked rows in between; PostgreSQL picks with SKIP LOCKED first).
# The picked rows are todo by the pick itself, in the same statement: the update finds them
# by primary key (a status test here would lead SQLite to walk every todo task instead).
CLAIM_TOP = (
    UPDATE_TASKS.where(T.c.id.in_(CLAIM_PICK.scalar_subquery())).values(CLAIMED).returning(*T.c)
)
RUNNING_COUNT = (
    select(func.count()).select_from(T).where(schema.status_is(T.c.status, Status.IN_PROGRESS))
)
MAX_RUNNING = select(schema.meta.c.value).where(schema.meta.c.key == "max_running")
# Room under the store's cap (firm db limit) for one more session: true without a cap; the
# running sessions are counted only when there is one.
ROOM_FOR_ONE = func.coalesce(
    select(cast(schema.meta.c.value, Integer) > RUNNING_COUNT.scalar_subquery())
    .where(schema.meta.c.key == "max_running")
    .scalar_subquery(),
    true(),
)

# SQLite: a claim of up to p_limit cut to the room the store's cap leaves, in the claim's own
# statement (its pick's LIMIT), as ROOM_FOR_ONE is for one: without a cap the limit is
# p_limit and nothing is counted. A claim otherwise reads the cap, and then the running
# sessions, in statements of their own first.
ROOM_UNDER_CAP = func.max(
    0,
    func.min(
        bindparam("p_limit"),
        func.coalesce(
            select(cast(schema.meta.c.value, Integer) - RUNNING_COUNT.scalar_subquery())
            .where(schema.meta.c.key == "max_running")
            .scalar_subquery(),
            bindparam("p_limit"),
        ),
    ),
)
CLAIM_TOP_CAPPED = (
    UPDATE_TASKS.where(T.c.id.in_(CLAIM_PICK.limit(ROOM_UNDER_CAP).scalar_subquery()))
    .values(CLAIMED)
    .returning(*T.c)
)

# --- the chain -----------------------------------------------------------------------------

CHAIN_HEAD = select(HEAD.c.seq, HEAD.c.hash).where(HEAD.c.id == 1)
CHAIN_HEAD_FOR_UPDATE = CHAIN_HEAD.with_for_update()
LAST_SEQ = select(HEAD.c.seq)
INSERT_EVENTS = insert(E)
MOVE_HEAD = (
    update(HEAD).where(HEAD.c.id == 1).values(seq=bindparam("p_seq"), hash=bindparam("p_hash"))
)
