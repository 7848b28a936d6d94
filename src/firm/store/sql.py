"""The store over SQLAlchemy Core: one code path for SQLite (embedded) and PostgreSQL.

Every write is one short transaction. On SQLite it starts with BEGIN IMMEDIATE (the single
writer lock, taken up front so two writers never deadlock on lock upgrade); on PostgreSQL the
rows that matter are locked explicitly, always ancestors before descendants, and the chain head
last, right before commit — so no lock cycle can form. Every public method is one transaction
and is re-run on a transient database error (store/retry.py); on PostgreSQL each commit that
appends events also sends a NOTIFY (store/notify.py), so other machines hear of it at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    case,
    create_engine,
    delete,
    event,
    exists,
    false,
    func,
    insert,
    literal,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.exc import IntegrityError, OperationalError

from firm.errors import StoreError, TaskNotFound, TaskNotHeld
from firm.store import migrate, notify, schema
from firm.store import queries as Q
from firm.store import runs as run_reads
from firm.store.base import (
    DelegateResult,
    Event,
    EventListener,
    NewTask,
    PendingEvents,
    RunSpec,
    SettleResult,
)
from firm.store.notify import PgListener, SignalListener, StoreSignal
from firm.store.retry import RetryPolicy, retrying
from firm.store.rows import event_from_row, task_from_row
from firm.store.transaction import DbClock, Tx
from firm.tasks import OPEN, Outcome, Status, Task, new_task_id, normalise_title

log = logging.getLogger("firm.store")

T = schema.tasks
E = schema.events
OPEN_VALUES = [str(s) for s in OPEN]
_CLAIM_LOCK = 0x6669726D01  # the advisory lock capped claims take turns under (PostgreSQL)


def _requeue_reason(
    worker: str | None, expires: float | None, dead: bool, now: float
) -> tuple[str, str]:
    """Why recovery took a task back, for the audit log: which worker, and how we know."""
    rerun = "its session will be re-run from the start of its turn"
    if worker is None:
        return "no_worker", f"no worker held it; {rerun}"
    if dead:
        return "worker_dead", f"worker {worker} is no longer running (its process is gone); {rerun}"
    late = f" {now - expires:.1f}s ago" if expires is not None else ""
    return (
        "lease_expired",
        f"worker {worker} lost its lease (expired{late}: the worker died, hung or lost the "
        f"database); {rerun}",
    )


def sqlite_url(path: str | Path) -> str:
    p = Path(path).expanduser().resolve()
    p.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{p}"


class SqlStore:
    """The Store protocol over SQLAlchemy Core."""

    poll_interval = 0.2  # seconds between looks for other processes' commits
    listen_poll_interval = 5.0  # the safety net while LISTEN is connected (PostgreSQL)

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 16,
        migrate: bool | None = None,
        check_schema: bool = True,
        retry_window: float = 60.0,
    ):
        """Open the store at url. migrate: bring the schema up to date on open (default: on
        SQLite, yes; on PostgreSQL, no — `firm db upgrade` does it, once, for every worker).
        check_schema=False opens without looking at the schema (for upgrade_schema alone)."""
        self.url = url
        self.retry_policy = RetryPolicy(window=retry_window)
        self._listeners: list[EventListener] = []
        self._signal_listeners: list[SignalListener] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        self._generation = 0  # bumped on every commit or signal, so no wake-up is lost
        self._pg_listener: PgListener | None = None
        try:
            if url.startswith("sqlite"):
                self.dialect = "sqlite"
                self.engine = create_engine(
                    url,
                    pool_size=pool_size,
                    max_overflow=64,
                    pool_timeout=60,
                    connect_args={"timeout": 60, "check_same_thread": False},
                )
                self._setup_sqlite()
            else:
                self.dialect = "postgresql"
                if url.startswith("postgresql://") or url.startswith("postgres://"):
                    url = "postgresql+psycopg://" + url.split("://", 1)[1]
                self.engine = create_engine(
                    url,
                    pool_size=pool_size,
                    max_overflow=64,
                    # No ping per checkout (a round trip per transaction): a connection that
                    # died while idle fails its first statement, and the retry layer reconnects.
                    connect_args={
                        "application_name": notify.application_name("store"),
                        "connect_timeout": 10,
                    },
                )
        except ModuleNotFoundError as exc:
            raise StoreError(
                f"cannot open {url}: {exc.name} is not installed (pip install 'firm[postgres]')"
            ) from None
        self._locking = self.dialect == "postgresql"
        self._writer: threading.Lock | contextlib.nullcontext[None] = (
            threading.Lock() if self.dialect == "sqlite" else contextlib.nullcontext()
        )
        self._clock = DbClock(self.dialect == "postgresql")
        if check_schema:
            self._check_schema(self.dialect == "sqlite" if migrate is None else migrate)

    @property
    def safe_url(self) -> str:
        """The URL without its password, for messages and logs."""
        return migrate.safe_url(self.engine)

    # --- connection set-up ---------------------------------------------------------------

    def _setup_sqlite(self) -> None:
        @event.listens_for(self.engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Let SQLAlchemy's begin event emit BEGIN itself, so writes can say IMMEDIATE.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=60000")
            # The log only grows; a bigger page cache keeps its indexes' upper levels in
            # memory as it does (the default is 2 MB).
            cur.execute("PRAGMA cache_size=-65536")
            cur.close()

        @event.listens_for(self.engine, "begin")
        def _on_begin(conn: Connection) -> None:
            # Writes take the write lock up front. Reads are single statements, each its own
            # snapshot in autocommit mode: no BEGIN/COMMIT round for them.
            if conn.get_execution_options().get("firm_write", False):
                conn.exec_driver_sql("BEGIN IMMEDIATE")

    @retrying
    def _check_schema(self, auto_migrate: bool) -> None:
        try:
            with self._read() as conn:
                revision = migrate.current_revision(conn)
                version = None
                if revision is not None:
                    version = conn.execute(
                        select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
                    ).scalar()
            if revision != schema.HEAD_REVISION:
                if revision is not None and revision not in migrate.known_revisions():
                    raise migrate.newer_schema(self.engine, revision)
                if not auto_migrate:
                    where = "is empty" if revision is None else f"is at revision {revision}"
                    raise StoreError(
                        f"the database at {self.safe_url} {where}; this firm needs schema "
                        f"revision {schema.HEAD_REVISION}: run `firm db upgrade --db URL` once"
                    )
                migrate.upgrade(self.engine)
            elif version is not None and int(version) > schema.SCHEMA_VERSION:
                raise StoreError(
                    f"{self.safe_url} was written by a newer firm (schema {version}, this firm "
                    f"knows up to {schema.SCHEMA_VERSION}); upgrade firm to open it"
                )
        except OperationalError as exc:
            if self.dialect == "postgresql" and exc.connection_invalidated:
                raise  # the retry layer waits for the server to come back
            raise StoreError(f"cannot open the store at {self.safe_url}: {exc.orig}") from None

    def upgrade_schema(self) -> tuple[str | None, str | None]:
        """Run the migrations up to head (what `firm db upgrade` does); idempotent."""
        return migrate.upgrade(self.engine)

    def close(self) -> None:
        if self._pg_listener is not None:
            self._pg_listener.stop()
            self._pg_listener = None
        self.engine.dispose()

    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        """Call listener with the events of every transaction this process commits.

        In-process only, by design: another process's commits reach this one through
        listen() (PostgreSQL) and through the log itself (events_after + wait_for_change).
        """
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def listen(self, listener: SignalListener) -> Callable[[], None]:
        """Call listener with a StoreSignal whenever any process commits to the store.

        On PostgreSQL this is LISTEN/NOTIFY (a hint: the stored state is the truth). On SQLite
        there is no cross-process channel and nothing is called; sessions still see a cancel
        at their next step by reading the store, and workers see new work at their heartbeat.
        """
        with self._lock:
            self._signal_listeners.append(listener)
        self._ensure_listening()

        def unlisten() -> None:
            with self._lock:
                if listener in self._signal_listeners:
                    self._signal_listeners.remove(listener)

        return unlisten

    def _ensure_listening(self) -> None:
        if self.dialect != "postgresql":
            return
        with self._lock:
            if self._pg_listener is None:
                conninfo = self.engine.url.set(drivername="postgresql").render_as_string(
                    hide_password=False
                )
                self._pg_listener = PgListener(conninfo, self._on_signal).start()

    def _on_signal(self, signal: StoreSignal) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()
        with self._lock:
            listeners = list(self._signal_listeners)
        for listener in listeners:
            try:
                listener(signal)
            except Exception:  # one bad listener must not deafen the others
                log.exception("store: a signal listener failed")

    @contextmanager
    def _write(self) -> Iterator[Tx]:
        # SQLite has one writer. Queue this process's writers on a Python lock, which hands
        # over in microseconds, instead of SQLite's busy handler, which sleeps in steps of
        # milliseconds; the busy timeout is then left for writers in other processes.
        with self._writer, self.engine.connect() as conn:
            conn.execution_options(firm_write=True)
            with conn.begin():
                tx = Tx(conn, self._locking, self._clock.now(conn))
                yield tx
                tx.flush()
        if tx.appended:
            for listener in list(self._listeners):
                try:
                    listener(tx.appended)
                except Exception:  # committed is committed: a listener cannot undo or redo it
                    log.exception("store: an event listener failed")
            with self._changed:
                self._generation += 1
                self._changed.notify_all()

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    # --- helpers -------------------------------------------------------------------------

    def _lock_task(self, tx: Tx, task_id: str) -> Task | None:
        q = Q.TASK_FOR_UPDATE if tx.locking else Q.TASK
        row = tx.conn.execute(q, {"id": task_id}).first()
        return task_from_row(row) if row else None

    def _lock_family(self, tx: Tx, task_id: str) -> Task:
        """The task, read under the lock order: on PostgreSQL its parent's row is locked
        first (parent before child, everywhere); SQLite's transaction holds the whole file."""
        if tx.locking:
            head = tx.conn.execute(Q.PARENT_OF, {"id": task_id}).first()
            if head is None:
                raise TaskNotFound(task_id)
            if head[0] is not None:
                self._lock_task(tx, head[0])
        task = self._lock_task(tx, task_id)
        if task is None:
            raise TaskNotFound(task_id)
        return task

    def _open_children(self, conn: Connection, parent_id: str) -> int:
        return conn.execute(Q.OPEN_CHILDREN, {"id": parent_id}).scalar_one()

    def _wake_if_done(self, tx: Tx, parent_id: str | None) -> list[str]:
        """The wake rule: a waiting task whose subtasks are all terminal goes back to todo.

        Called inside the transaction that made a subtask terminal, holding the parent's row
        lock, so two subtasks finishing at once cannot both see the other still open (inv. 1).
        """
        if parent_id is None:
            return []
        woke = tx.conn.execute(Q.WAKE, {"p_parent": parent_id, "p_now": tx.now}).all()
        for task_id, assignee in woke:
            tx.emit("woken", task_id, assignee)
        return [w[0] for w in woke]

    def _lock_subtree(self, tx: Tx, task_id: str, open_only: bool):  # type: ignore[no-untyped-def]
        """Before changing a whole subtree: its parent's row, then (PostgreSQL) the subtree's
        rows top-down — the lock order settle uses. Returns the parent's id and the subtree."""
        head = tx.conn.execute(Q.PARENT_OF, {"id": task_id}).first()
        if head is None:
            raise TaskNotFound(task_id)
        parent_id = head[0]
        if parent_id is not None:
            self._lock_task(tx, parent_id)
        sub = self._subtree_ids(task_id, open_only=open_only).subquery()
        if tx.locking:
            tx.conn.execute(
                select(T.c.id)
                .join(sub, sub.c.id == T.c.id)
                .order_by(sub.c.depth, T.c.id)
                .with_for_update(of=T)
            )
        return parent_id, sub

    def _subtree_ids(self, root_id: str, open_only: bool):  # type: ignore[no-untyped-def]
        """A recursive CTE over the subtree: one statement whatever its size."""
        base = select(T.c.id, T.c.status, literal(0).label("depth")).where(T.c.id == root_id)
        tree = base.cte("subtree", recursive=True)
        child = T.alias("child")
        tree = tree.union_all(
            select(child.c.id, child.c.status, (tree.c.depth + 1).label("depth")).where(
                child.c.parent_id == tree.c.id
            )
        )
        q = select(tree.c.id, tree.c.depth)
        if open_only:
            q = q.where(tree.c.status.in_(OPEN_VALUES))
        return q

    # --- runs and tasks ------------------------------------------------------------------

    def create_run(self, run: RunSpec, root: NewTask, task_id: str | None = None) -> Task:
        # The id is chosen once, outside the retried transaction: if a commit succeeded but
        # its acknowledgement was lost, the retry finds the run instead of making a second one.
        return self._create_run(run, root, task_id or new_task_id())

    @retrying
    def _create_run(self, run: RunSpec, root: NewTask, task_id: str) -> Task:
        try:
            return self._insert_run(run, root, task_id)
        except IntegrityError:
            with self._read() as conn:
                row = conn.execute(select(T).where(T.c.id == task_id)).first()
            if row is None or row._mapping["description"] != root.description:
                raise
            return task_from_row(row)

    def _insert_run(self, run: RunSpec, root: NewTask, task_id: str) -> Task:
        with self._write() as tx:
            tx.conn.execute(
                insert(schema.runs).values(
                    id=task_id,
                    org_yaml=run.org_yaml,
                    org_source=run.org_source,
                    brain=run.brain,
                    brain_options=json.dumps(run.brain_options),
                    workspace=run.workspace,
                    created_at=tx.now,
                )
            )
            task = self._insert_task(tx, task_id, task_id, None, root, dedupe_key=None)
            tx.emit(
                "created",
                task,
                title=task.title,
                description=task.description,
                priority=str(task.priority),
                language=task.language,
                created_by=task.created_by,
                grant=task.grant,
                brain=run.brain,
                org_sha256=hashlib.sha256(run.org_yaml.encode()).hexdigest(),
            )
        return task

    def _insert_task(
        self,
        tx: Tx,
        task_id: str,
        root_id: str,
        parent_id: str | None,
        new: NewTask,
        dedupe_key: str | None,
    ) -> Task:
        values = {
            "id": task_id,
            "root_id": root_id,
            "parent_id": parent_id,
            "title": new.title,
            "description": new.description,
            "status": str(Status.TODO),
            "assignee": new.assignee,
            "created_by": new.created_by,
            "priority": int(new.priority),
            "language": new.language,
            "result": None,
            "files": "[]",
            "error": None,
            "created_at": tx.now,
            "updated_at": tx.now,
            "started_at": None,
            "finished_at": None,
            "turn": 0,
            "attempts": 0,
            "dedupe_key": dedupe_key,
            "grant": json.dumps(new.grant) if new.grant is not None else None,
            "revoked": False,
            "worker_id": None,
            "lease_expires_at": None,
            "calls": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }
        row = tx.conn.execute(Q.INSERT_TASK, {f"p_{k}": v for k, v in values.items()}).one()
        return task_from_row(row)

    @retrying
    def run(self, run_id: str) -> RunSpec:
        with self._read() as conn:
            row = conn.execute(select(schema.runs).where(schema.runs.c.id == run_id)).first()
        if row is None:
            raise TaskNotFound(run_id)
        m = row._mapping
        return RunSpec(
            org_yaml=m["org_yaml"],
            org_source=m["org_source"],
            brain=m["brain"],
            brain_options=json.loads(m["brain_options"]),
            workspace=m["workspace"],
            id=m["id"],
            created_at=m["created_at"],
        )

    @retrying
    def open_run_ids(self) -> list[str]:
        with self._read() as conn:
            return list(
                conn.execute(
                    select(T.c.root_id).distinct().where(T.c.status.in_(OPEN_VALUES))
                ).scalars()
            )

    @retrying
    def delegate(
        self,
        parent_id: str,
        turn: int,
        new: NewTask,
        events: PendingEvents = (),
        worker_id: str | None = None,
    ) -> DelegateResult:
        """Create a subtask, or return the one this turn already created under the same
        (assignee, normalised title). With worker_id, the parent must still be held by that
        worker: a session cut off by a lost lease cannot add work behind its successor."""
        key_src = f"{parent_id}\x00{turn}\x00{new.assignee}\x00{normalise_title(new.title)}"
        key = hashlib.sha256(key_src.encode()).hexdigest()[:40]
        for _ in range(2):
            try:
                with self._write() as tx:
                    # The parent's lock first: an identical delegation racing this one (a
                    # re-run session on another machine) commits before we look, so we see it.
                    parent = self._lock_task(tx, parent_id)
                    if parent is None:
                        raise TaskNotFound(parent_id)
                    tx.pending.extend(events)  # written whichever way this goes
                    existing = tx.conn.execute(Q.BY_DEDUPE_KEY, {"key": key}).first()
                    if existing is not None:
                        return DelegateResult(task_from_row(existing), created=False)
                    if parent.status != Status.IN_PROGRESS:
                        raise TaskNotHeld(
                            f"task {parent_id} is {parent.status}; it can no longer delegate"
                        )
                    if worker_id is not None and parent.worker_id != worker_id:
                        raise TaskNotHeld(
                            f"task {parent_id} was handed to another worker; this session "
                            "can no longer delegate"
                        )
                    task = self._insert_task(tx, new_task_id(), parent.root_id, parent_id, new, key)
                    tx.emit(
                        "delegated",
                        task,
                        new.created_by,
                        to=new.assignee,
                        title=task.title,
                        description=task.description,
                        priority=str(task.priority),
                        language=task.language,
                        parent_id=parent_id,
                        grant=task.grant,
                    )
                return DelegateResult(task, created=True)
            except IntegrityError:
                continue  # lost a race to an identical delegation: read the winner's row
        with self._read() as conn:
            row = conn.execute(select(T).where(T.c.dedupe_key == key)).one()
        return DelegateResult(task_from_row(row), created=False)

    @retrying
    def claim(
        self, worker_id: str, limit: int, lease_seconds: float, global_limit: int | None = None
    ) -> list[Task]:
        if limit <= 0:
            return []
        with self._write() as tx:
            if global_limit is None:  # the store's own cap (firm db limit), if one is set
                stored = tx.conn.execute(Q.MAX_RUNNING).scalar()
                global_limit = int(stored) if stored is not None else None
            if global_limit is not None:
                if tx.locking:
                    # Counting then claiming is a read-then-write: capped claims take turns so
                    # two workers cannot both see room for the last slot.
                    tx.conn.execute(select(func.pg_advisory_xact_lock(_CLAIM_LOCK)))
                running = tx.conn.execute(Q.RUNNING_COUNT).scalar_one()
                limit = min(limit, global_limit - running)
                if limit <= 0:
                    return []
            pick = Q.CLAIM_PICK_SKIP_LOCKED if tx.locking else Q.CLAIM_PICK
            ids = list(tx.conn.execute(pick, {"p_limit": limit}).scalars())
            if not ids:
                return []
            rows = tx.conn.execute(
                Q.CLAIM,
                {
                    "p_ids": ids,
                    "p_worker": worker_id,
                    "p_lease": tx.now + lease_seconds,
                    "p_now": tx.now,
                },
            ).all()
            claimed = sorted(
                (task_from_row(r) for r in rows), key=lambda t: (-t.priority, t.created_at, t.id)
            )
            for t in claimed:
                tx.emit("started", t, attempt=t.attempts, turn=t.turn, worker=worker_id)
        return claimed

    @retrying
    def settle(
        self, task_id: str, worker_id: str, outcome: Outcome, events: PendingEvents = ()
    ) -> SettleResult:
        with self._write() as tx:
            task = self._lock_family(tx, task_id)
            parent_id = task.parent_id
            if task.status != Status.IN_PROGRESS or task.worker_id != worker_id:
                # Too late to settle (cancelled, or re-run elsewhere), but the calls the
                # session made did run: their record stays, marked as from a superseded run.
                tx.pending.extend(
                    (kind, tid, agent, {**data, "superseded": True})
                    for kind, tid, agent, data in events
                )
                return SettleResult(False, task)
            tx.pending.extend(events)  # the session's own record comes before its outcome
            woke: list[str] = []
            if outcome.kind in ("done", "failed"):
                status = Status.DONE if outcome.kind == "done" else Status.FAILED
                ended = {
                    "p_id": task_id,
                    "p_status": str(status),
                    "p_result": outcome.result,
                    "p_error": outcome.error,
                    "p_files": json.dumps(list(outcome.files)),
                    "p_now": tx.now,
                }
                after = task_from_row(tx.conn.execute(Q.SETTLE_ENDED, ended).one())
                if status == Status.DONE:
                    tx.emit("completed", task, result=outcome.result, files=list(outcome.files))
                else:
                    tx.emit("failed", task, error=outcome.error)
                woke = self._wake_if_done(tx, parent_id)
            elif outcome.kind == "yielded":
                still_open = self._open_children(tx.conn, task_id)
                status = Status.WAITING if still_open else Status.TODO
                yielded = {"p_id": task_id, "p_status": str(status), "p_now": tx.now}
                after = task_from_row(tx.conn.execute(Q.SETTLE_YIELDED, yielded).one())
                tx.emit("waiting", task, open_subtasks=still_open)
                if not still_open:  # invariant 2: reports all finished before the turn ended
                    tx.emit("woken", task, immediately=True)
                    woke = [task_id]
            else:
                raise ValueError(f"unknown outcome {outcome.kind!r}")
        return SettleResult(True, after, woke)

    @retrying
    def cancel(self, task_id: str, reason: str, by: str = "user") -> list[Task]:
        with self._write() as tx:
            parent_id, sub = self._lock_subtree(tx, task_id, open_only=True)
            rows = tx.conn.execute(
                update(T)
                .where(T.c.id.in_(select(sub.c.id)), T.c.status.in_(OPEN_VALUES))
                .values(
                    status=str(Status.CANCELLED),
                    error=reason,
                    finished_at=tx.now,
                    updated_at=tx.now,
                    lease_expires_at=None,
                )
                .returning(*T.c)
            ).all()
            cancelled = [task_from_row(r) for r in rows]
            for t in cancelled:
                tx.emit("cancelled", t, reason=reason, by=by)
            if cancelled:
                self._wake_if_done(tx, parent_id)
        return cancelled

    @retrying
    def revoke(self, task_id: str, reason: str, by: str = "user") -> list[Task]:
        """Revoke a task's authority and its whole subtree's, in one statement.

        Every task in the subtree is marked revoked (terminal ones too: the flag is a fact about
        authority, which the audit trail relies on); the open ones are also cancelled, so their
        sessions stop at their next step. Returns the tasks newly revoked.
        """
        with self._write() as tx:
            parent_id, sub = self._lock_subtree(tx, task_id, open_only=False)
            was_open = T.c.status.in_(OPEN_VALUES)
            rows = tx.conn.execute(
                update(T)
                .where(T.c.id.in_(select(sub.c.id)), T.c.revoked == false())
                .values(
                    revoked=true(),
                    status=case((was_open, str(Status.CANCELLED)), else_=T.c.status),
                    error=case((was_open, f"revoked: {reason}"), else_=T.c.error),
                    finished_at=case((was_open, tx.now), else_=T.c.finished_at),
                    lease_expires_at=case((was_open, None), else_=T.c.lease_expires_at),
                    updated_at=tx.now,
                )
                .returning(*T.c)
            ).all()
            revoked = [task_from_row(r) for r in rows]
            for t in revoked:
                tx.emit("revoked", t, reason=reason, by=by, origin=task_id)
            for t in revoked:  # RETURNING shows new rows: those cancelled now finished now
                if t.status == Status.CANCELLED and t.finished_at == tx.now:
                    tx.emit("cancelled", t, reason=f"revoked: {reason}", by=by)
            if revoked:
                self._wake_if_done(tx, parent_id)
        return revoked

    @retrying
    def recover(self, worker_alive: Callable[[str], bool | None]) -> dict[str, list[str]]:
        """Invariant 5, set-based: requeue orphaned sessions, wake managers with nothing open.

        worker_alive(worker_id) says True/False when it can tell (a process on this host), or
        None when it cannot (another machine): then only an expired lease frees the task. Any
        worker may run this at any time; on PostgreSQL rows another transaction holds are
        skipped (whoever holds them settles or wakes them), so recovery never waits or deadlocks.
        """
        with self._write() as tx:
            holders = list(
                tx.conn.execute(
                    select(T.c.worker_id).distinct().where(T.c.status == str(Status.IN_PROGRESS))
                ).scalars()
            )
            dead = {w for w in holders if w is not None and worker_alive(w) is False}
            stale = or_(
                T.c.lease_expires_at < tx.now,
                T.c.worker_id.is_(None),
                T.c.worker_id.in_(sorted(dead)),
            )
            pick = select(T.c.id, T.c.worker_id, T.c.lease_expires_at).where(
                T.c.status == str(Status.IN_PROGRESS), stale
            )
            if tx.locking:
                pick = pick.with_for_update(skip_locked=True)
            orphans = {r[0]: (r[1], r[2]) for r in tx.conn.execute(pick)}
            requeued = []
            if orphans:
                requeued = tx.conn.execute(
                    update(T)
                    .where(T.c.id.in_(list(orphans)), T.c.status == str(Status.IN_PROGRESS))
                    .values(
                        status=str(Status.TODO),
                        worker_id=None,
                        lease_expires_at=None,
                        updated_at=tx.now,
                    )
                    .returning(T.c.id, T.c.assignee, T.c.attempts)
                ).all()
            for tid, assignee, attempts in requeued:
                worker, expires = orphans[tid]
                cause, reason = _requeue_reason(worker, expires, worker in dead, tx.now)
                tx.emit(
                    "requeued",
                    tid,
                    assignee,
                    attempt=attempts,
                    worker=worker,
                    cause=cause,
                    reason=reason,
                )
            c = T.alias("c")
            idle = select(T.c.id).where(
                T.c.status == str(Status.WAITING),
                ~exists().where(c.c.parent_id == T.c.id, c.c.status.in_(OPEN_VALUES)),
            )
            if tx.locking:
                idle = idle.with_for_update(of=T, skip_locked=True)
            idle_ids = list(tx.conn.execute(idle).scalars())
            woke = []
            if idle_ids:
                woke = tx.conn.execute(
                    update(T)
                    .where(
                        T.c.id.in_(idle_ids),
                        T.c.status == str(Status.WAITING),
                        ~exists().where(c.c.parent_id == T.c.id, c.c.status.in_(OPEN_VALUES)),
                    )
                    .values(status=str(Status.TODO), updated_at=tx.now)
                    .returning(T.c.id, T.c.assignee)
                ).all()
            for tid, assignee in woke:
                tx.emit("woken", tid, assignee, recovered=True)
        return {"requeued": [r[0] for r in requeued], "woken": [w[0] for w in woke]}

    @retrying
    def max_running(self) -> int | None:
        """The cap on sessions running at once across every worker of this store, if set."""
        with self._read() as conn:
            value = conn.execute(Q.MAX_RUNNING).scalar()
        return int(value) if value is not None else None

    @retrying
    def set_max_running(self, limit: int | None) -> None:
        """Set (or, with None, lift) the store-wide cap every engine's claims respect."""
        if limit is not None and limit < 1:
            raise StoreError("the cap on running sessions must be at least 1")
        with self._write() as tx:
            meta = schema.meta
            tx.conn.execute(delete(meta).where(meta.c.key == "max_running"))
            if limit is not None:
                tx.conn.execute(insert(meta).values(key="max_running", value=str(limit)))
            tx.emit("setting", None, None, max_running=limit)

    @retrying
    def renew_leases(
        self, worker_id: str, lease_seconds: float, task_ids: Iterable[str] | None = None
    ) -> list[str]:
        """Extend this worker's leases (only on task_ids, when given); returns the ids it still
        holds. A running session missing from the answer has lost its task to recovery (or a
        cancel) and should stop: another worker may be running it already."""
        with self._write() as tx:
            q = update(T).where(T.c.worker_id == worker_id, T.c.status == str(Status.IN_PROGRESS))
            if task_ids is not None:
                q = q.where(T.c.id.in_(list(task_ids)))
            rows = tx.conn.execute(
                q.values(lease_expires_at=tx.now + lease_seconds).returning(T.c.id)
            )
            return list(rows.scalars())

    @retrying
    def release(self, worker_id: str, task_ids: Iterable[str], reason: str) -> list[str]:
        """Hand sessions this worker cannot finish back to todo (a clean shutdown)."""
        ids = list(task_ids)
        if not ids:
            return []
        with self._write() as tx:
            rows = tx.conn.execute(
                update(T)
                .where(
                    T.c.id.in_(ids),
                    T.c.worker_id == worker_id,
                    T.c.status == str(Status.IN_PROGRESS),
                )
                .values(
                    status=str(Status.TODO),
                    worker_id=None,
                    lease_expires_at=None,
                    updated_at=tx.now,
                )
                .returning(T.c.id, T.c.assignee)
            ).all()
            for tid, assignee in rows:
                tx.emit("requeued", tid, assignee, reason=reason)
        return [r[0] for r in rows]

    @retrying
    def add_usage(
        self, task_id: str, calls: int, prompt_tokens: int, completion_tokens: int
    ) -> None:
        with self._write() as tx:
            tx.conn.execute(
                update(T)
                .where(T.c.id == task_id)
                .values(
                    calls=T.c.calls + calls,
                    prompt_tokens=T.c.prompt_tokens + prompt_tokens,
                    completion_tokens=T.c.completion_tokens + completion_tokens,
                )
            )

    # --- events --------------------------------------------------------------------------

    @retrying
    def append_events(
        self, items: list[tuple[str, str | None, str | None, dict[str, Any]]]
    ) -> list[Event]:
        with self._write() as tx:
            tx.pending.extend(items)
        return tx.appended

    @retrying
    def events_after(
        self, seq: int, limit: int = 1000, task_ids: Iterable[str] | None = None
    ) -> list[Event]:
        q = select(E).where(E.c.seq > seq).order_by(E.c.seq).limit(limit)
        if task_ids is not None:
            q = q.where(E.c.task_id.in_(list(task_ids)))
        with self._read() as conn:
            return [event_from_row(r) for r in conn.execute(q)]

    def wait_for_change(self, after_seq: int, timeout: float) -> bool:
        """Block until the log has an event after after_seq, or timeout; True if it has.

        Commits in this process wake the waiter at once; on PostgreSQL so do commits by any
        other process (LISTEN/NOTIFY), with a look at the chain head every few seconds as the
        safety net; on SQLite other processes' commits are seen by looking every poll interval.
        The log itself is the truth: read it with events_after(your last seq), and no event is
        ever missed, not even across a reconnect.
        """
        self._ensure_listening()
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                generation = self._generation
            if self.last_seq() > after_seq:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            listening = self._pg_listener is not None and self._pg_listener.connected.is_set()
            interval = self.listen_poll_interval if listening else self.poll_interval
            with self._changed:
                if self._generation == generation:  # nothing arrived since we looked
                    self._changed.wait(min(remaining, interval))

    @retrying
    def event_span(self, task_ids: Iterable[str]) -> tuple[int, int] | None:
        """The first and last seq of the events of these tasks, or None if they have none."""
        ids = list(task_ids)
        lo: int | None = None
        hi: int | None = None
        with self._read() as conn:
            for i in range(0, len(ids), 500):  # bounded IN lists, whatever the tree's size
                row = conn.execute(
                    select(func.min(E.c.seq), func.max(E.c.seq)).where(
                        E.c.task_id.in_(ids[i : i + 500])
                    )
                ).one()
                if row[0] is not None:
                    lo = row[0] if lo is None else min(lo, row[0])
                    hi = row[1] if hi is None else max(hi, row[1])
        return None if lo is None or hi is None else (lo, hi)

    @retrying
    def last_seq(self) -> int:
        with self._read() as conn:
            return conn.execute(Q.LAST_SEQ).scalar_one()

    # --- reads ---------------------------------------------------------------------------

    @retrying
    def get_task(self, task_id: str) -> Task:
        with self._read() as conn:
            row = conn.execute(Q.TASK, {"id": task_id}).first()
        if row is None:
            raise TaskNotFound(task_id)
        return task_from_row(row)

    @retrying
    def session_state(self, task_id: str) -> tuple[Status, bool, str | None] | None:
        """Status, revoked flag and holding worker: what a running session checks each step."""
        with self._read() as conn:
            row = conn.execute(Q.SESSION_STATE, {"id": task_id}).first()
        return (Status(row[0]), bool(row[1]), row[2]) if row else None

    @retrying
    def lineage(self, task_id: str) -> tuple[int, list[Task]]:
        """The log's head seq, then the task and its ancestors (nearest first).

        Both come from one statement, so one snapshot: a revocation not in the rows was
        committed after the head, so "not revoked as of seq N" is a claim the log can back.
        """
        with self._read() as conn:
            rows = conn.execute(Q.LINEAGE, {"task_id": task_id}).all()
        if not rows:
            raise TaskNotFound(task_id)
        return rows[0]._mapping["head_seq"], [task_from_row(r) for r in rows]

    @retrying
    def children(self, task_id: str) -> list[Task]:
        with self._read() as conn:
            rows = conn.execute(Q.CHILDREN, {"id": task_id}).all()
        return [task_from_row(r) for r in rows]

    @retrying
    def subtree(self, task_id: str) -> list[Task]:
        """The task and all its descendants, parents before children."""
        sub = self._subtree_ids(task_id, open_only=False).subquery()
        with self._read() as conn:
            rows = conn.execute(
                select(T)
                .join(sub, sub.c.id == T.c.id)
                .order_by(sub.c.depth, T.c.created_at, T.c.id)
            ).all()
        if not rows:
            raise TaskNotFound(task_id)
        return [task_from_row(r) for r in rows]

    @retrying
    def list_tasks(
        self,
        *,
        status: str | None = None,
        assignee: str | None = None,
        root_id: str | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[Task]:
        q = select(T)
        if status:
            q = q.where(T.c.status == status)
        if assignee:
            q = q.where(T.c.assignee == assignee)
        if root_id:
            q = q.where(T.c.root_id == root_id)
        q = q.order_by(T.c.created_at, T.c.id).limit(limit).offset(offset)
        with self._read() as conn:
            return [task_from_row(r) for r in conn.execute(q)]

    @retrying
    def run_summaries(self, limit: int = 50, offset: int = 0) -> list[run_reads.RunSummary]:
        """Goals newest first with their trees' counts and usage (store/runs.py)."""
        with self._read() as conn:
            return run_reads.run_summaries(conn, limit, offset)

    @retrying
    def run_events(self, run_id: str, after: int = 0, limit: int = 1000) -> list[Event]:
        """One goal's tree's events after seq, in order; TaskNotFound if it is no goal."""
        with self._read() as conn:
            if not run_reads.is_run(conn, run_id):
                raise TaskNotFound(run_id)
            return run_reads.run_events(conn, run_id, after, limit)

    @retrying
    def counts(self, root_id: str | None = None) -> dict[str, int]:
        q = select(T.c.status, func.count()).group_by(T.c.status)
        if root_id:
            q = q.where(T.c.root_id == root_id)
        with self._read() as conn:
            return {s: n for s, n in conn.execute(q)}
