"""The store over SQLAlchemy Core: one code path for SQLite (embedded) and PostgreSQL.

Every write is one short transaction. On SQLite it starts with BEGIN IMMEDIATE (the single
writer lock, taken up front so two writers never deadlock on lock upgrade); on PostgreSQL the
rows that matter are locked explicitly, always ancestors before descendants, and the chain head
last, right before commit — so no lock cycle can form.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    bindparam,
    case,
    create_engine,
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
from sqlalchemy.engine import Row
from sqlalchemy.exc import IntegrityError, OperationalError

from firm.audit.chain import GENESIS, canonical_json, entry_hash
from firm.errors import StoreError, TaskNotFound
from firm.store import schema
from firm.store.base import DelegateResult, Event, EventListener, NewTask, RunSpec, SettleResult
from firm.tasks import OPEN, Outcome, Priority, Status, Task, new_task_id, normalise_title

T = schema.tasks
E = schema.events
OPEN_VALUES = [str(s) for s in OPEN]


def _now() -> float:
    return round(time.time(), 6)


def _task(row: Row[Any]) -> Task:
    m = row._mapping
    return Task(
        id=m["id"],
        root_id=m["root_id"],
        parent_id=m["parent_id"],
        title=m["title"],
        description=m["description"],
        status=Status(m["status"]),
        assignee=m["assignee"],
        created_by=m["created_by"],
        priority=Priority(m["priority"]),
        language=m["language"],
        result=m["result"],
        files=tuple(json.loads(m["files"] or "[]")),
        error=m["error"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        started_at=m["started_at"],
        finished_at=m["finished_at"],
        turn=m["turn"],
        attempts=m["attempts"],
        grant=json.loads(m["grant"]) if m["grant"] else None,
        revoked=bool(m["revoked"]),
        worker_id=m["worker_id"],
        lease_expires_at=m["lease_expires_at"],
        usage={
            "calls": m["calls"],
            "prompt_tokens": m["prompt_tokens"],
            "completion_tokens": m["completion_tokens"],
        },
    )


def _event(row: Row[Any]) -> Event:
    m = row._mapping
    return Event(
        seq=m["seq"],
        ts=m["ts"],
        kind=m["kind"],
        task_id=m["task_id"],
        agent=m["agent"],
        data=json.loads(m["data"]),
        prev_hash=m["prev_hash"],
        hash=m["hash"],
    )


def _lineage_statement():  # type: ignore[no-untyped-def]
    """A task and its ancestors, nearest first: one recursive CTE, built once (it runs
    before every tool call, and building an aliased statement costs more than running it)."""
    base = select(T.c.id.label("id"), literal(0).label("depth")).where(
        T.c.id == bindparam("task_id")
    )
    up = base.cte("lineage", recursive=True)
    p = T.alias("p")
    up = up.union_all(
        select(p.c.parent_id, (up.c.depth + 1)).where(p.c.id == up.c.id, p.c.parent_id.is_not(None))
    )
    return select(T).join(up, up.c.id == T.c.id).order_by(up.c.depth)


_LINEAGE = _lineage_statement()


class _Tx:
    """A write transaction plus the events it will append when it commits."""

    def __init__(self, conn: Connection, locking: bool):
        self.conn = conn
        self.locking = locking  # explicit row locks (PostgreSQL); SQLite holds the db lock
        self.now = _now()
        self.pending: list[tuple[str, str | None, str | None, dict[str, Any]]] = []
        self.appended: list[Event] = []

    def emit(
        self, kind: str, task: Task | str | None, agent: str | None = None, **data: Any
    ) -> None:
        if isinstance(task, Task):
            task_id, agent = task.id, agent or task.assignee
        else:
            task_id = task
        self.pending.append((kind, task_id, agent, data))

    def flush(self) -> None:
        """Append pending events to the chain; called last, so the head lock is held briefly."""
        if not self.pending:
            return
        head = select(schema.chain_head.c.seq, schema.chain_head.c.hash).where(
            schema.chain_head.c.id == 1
        )
        if self.locking:
            head = head.with_for_update()
        seq, prev = self.conn.execute(head).one()
        rows = []
        for kind, task_id, agent, data in self.pending:
            seq += 1
            data = json.loads(canonical_json(data))  # what is hashed is exactly what is stored
            h = entry_hash(prev, seq, self.now, kind, task_id, agent, data)
            rows.append(
                {
                    "seq": seq,
                    "ts": self.now,
                    "kind": kind,
                    "task_id": task_id,
                    "agent": agent,
                    "data": canonical_json(data),
                    "prev_hash": prev,
                    "hash": h,
                }
            )
            self.appended.append(Event(seq, self.now, kind, task_id, agent, data, prev, h))
            prev = h
        self.conn.execute(insert(E), rows)
        self.conn.execute(
            update(schema.chain_head).where(schema.chain_head.c.id == 1).values(seq=seq, hash=prev)
        )
        self.pending.clear()


def sqlite_url(path: str | Path) -> str:
    p = Path(path).expanduser().resolve()
    p.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{p}"


class SqlStore:
    """The Store protocol over SQLAlchemy Core."""

    poll_interval = 0.2  # seconds between looks for other processes' commits

    def __init__(self, url: str, *, pool_size: int = 16):
        self.url = url
        self._listeners: list[EventListener] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition()
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
                    url, pool_size=pool_size, max_overflow=64, pool_pre_ping=True
                )
        except ModuleNotFoundError as exc:
            raise StoreError(
                f"cannot open {url}: {exc.name} is not installed (pip install 'firm[postgres]')"
            ) from None
        self._locking = self.dialect == "postgresql"
        self._ensure_schema()

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
            cur.close()

        @event.listens_for(self.engine, "begin")
        def _on_begin(conn: Connection) -> None:
            write = conn.get_execution_options().get("firm_write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    def _ensure_schema(self) -> None:
        try:
            with self.engine.begin() as conn:
                conn.execution_options(firm_write=True)
                schema.metadata.create_all(conn)
                version = conn.execute(
                    select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
                ).scalar()
                if version is None:
                    conn.execute(
                        insert(schema.meta).values(
                            key="schema_version", value=str(schema.SCHEMA_VERSION)
                        )
                    )
                elif int(version) > schema.SCHEMA_VERSION:
                    raise StoreError(
                        f"{self.url} was written by a newer firm (schema {version}, this firm "
                        f"knows up to {schema.SCHEMA_VERSION}); upgrade firm to open it"
                    )
                if conn.execute(select(schema.chain_head.c.id)).first() is None:
                    conn.execute(insert(schema.chain_head).values(id=1, seq=0, hash=GENESIS))
        except OperationalError as exc:
            raise StoreError(f"cannot open the store at {self.url}: {exc.orig}") from None

    def close(self) -> None:
        self.engine.dispose()

    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        """Call listener with the events of every transaction this process commits."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    @contextmanager
    def _write(self) -> Iterator[_Tx]:
        with self.engine.connect() as conn:
            conn.execution_options(firm_write=True)
            with conn.begin():
                tx = _Tx(conn, self._locking)
                yield tx
                tx.flush()
        if tx.appended:
            for listener in list(self._listeners):
                listener(tx.appended)
            with self._changed:
                self._changed.notify_all()

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    # --- helpers -------------------------------------------------------------------------

    def _lock_task(self, tx: _Tx, task_id: str) -> Task | None:
        q = select(T).where(T.c.id == task_id)
        if tx.locking:
            q = q.with_for_update()
        row = tx.conn.execute(q).first()
        return _task(row) if row else None

    def _open_children(self, conn: Connection, parent_id: str) -> int:
        return conn.execute(
            select(func.count())
            .select_from(T)
            .where(T.c.parent_id == parent_id, T.c.status.in_(OPEN_VALUES))
        ).scalar_one()

    def _wake_if_done(self, tx: _Tx, parent_id: str | None) -> list[str]:
        """The wake rule: a waiting task whose subtasks are all terminal goes back to todo.

        Called inside the transaction that made a subtask terminal, holding the parent's row
        lock, so two subtasks finishing at once cannot both see the other still open (inv. 1).
        """
        if parent_id is None:
            return []
        c = T.alias("c")
        woke = tx.conn.execute(
            update(T)
            .where(
                T.c.id == parent_id,
                T.c.status == str(Status.WAITING),
                ~exists().where(c.c.parent_id == parent_id, c.c.status.in_(OPEN_VALUES)),
            )
            .values(status=str(Status.TODO), updated_at=tx.now)
            .returning(T.c.id, T.c.assignee)
        ).all()
        for task_id, assignee in woke:
            tx.emit("woken", task_id, assignee)
        return [w[0] for w in woke]

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
        task_id = task_id or new_task_id()
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
            self._insert_task(tx, task_id, task_id, None, root, dedupe_key=None)
            task = self._lock_task(tx, task_id)
            assert task is not None
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
        tx: _Tx,
        task_id: str,
        root_id: str,
        parent_id: str | None,
        new: NewTask,
        dedupe_key: str | None,
    ) -> None:
        tx.conn.execute(
            insert(T).values(
                id=task_id,
                root_id=root_id,
                parent_id=parent_id,
                title=new.title,
                description=new.description,
                status=str(Status.TODO),
                assignee=new.assignee,
                created_by=new.created_by,
                priority=int(new.priority),
                language=new.language,
                files="[]",
                created_at=tx.now,
                updated_at=tx.now,
                turn=0,
                attempts=0,
                dedupe_key=dedupe_key,
                grant=json.dumps(new.grant) if new.grant is not None else None,
                revoked=False,
                calls=0,
                prompt_tokens=0,
                completion_tokens=0,
            )
        )

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

    def open_run_ids(self) -> list[str]:
        with self._read() as conn:
            return list(
                conn.execute(
                    select(T.c.root_id).distinct().where(T.c.status.in_(OPEN_VALUES))
                ).scalars()
            )

    def delegate(self, parent_id: str, turn: int, new: NewTask) -> DelegateResult:
        key_src = f"{parent_id}\x00{turn}\x00{new.assignee}\x00{normalise_title(new.title)}"
        key = hashlib.sha256(key_src.encode()).hexdigest()[:40]
        for _ in range(2):
            try:
                with self._write() as tx:
                    existing = tx.conn.execute(select(T).where(T.c.dedupe_key == key)).first()
                    if existing is not None:
                        return DelegateResult(_task(existing), created=False)
                    parent = self._lock_task(tx, parent_id)
                    if parent is None:
                        raise TaskNotFound(parent_id)
                    if parent.status != Status.IN_PROGRESS:
                        raise StoreError(
                            f"task {parent_id} is {parent.status}; it can no longer delegate"
                        )
                    task_id = new_task_id()
                    self._insert_task(tx, task_id, parent.root_id, parent_id, new, key)
                    task = self._lock_task(tx, task_id)
                    assert task is not None
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
        return DelegateResult(_task(row), created=False)

    def claim(
        self, worker_id: str, limit: int, lease_seconds: float, global_limit: int | None = None
    ) -> list[Task]:
        if limit <= 0:
            return []
        with self._write() as tx:
            if global_limit is not None:
                running = tx.conn.execute(
                    select(func.count()).select_from(T).where(T.c.status == str(Status.IN_PROGRESS))
                ).scalar_one()
                limit = min(limit, global_limit - running)
                if limit <= 0:
                    return []
            pick = (
                select(T.c.id)
                .where(T.c.status == str(Status.TODO))
                .order_by(T.c.priority.desc(), T.c.created_at, T.c.id)
                .limit(limit)
            )
            if tx.locking:
                pick = pick.with_for_update(skip_locked=True)
            ids = list(tx.conn.execute(pick).scalars())
            if not ids:
                return []
            rows = tx.conn.execute(
                update(T)
                .where(T.c.id.in_(ids), T.c.status == str(Status.TODO))
                .values(
                    status=str(Status.IN_PROGRESS),
                    worker_id=worker_id,
                    lease_expires_at=tx.now + lease_seconds,
                    attempts=T.c.attempts + 1,
                    started_at=func.coalesce(T.c.started_at, tx.now),
                    updated_at=tx.now,
                )
                .returning(*T.c)
            ).all()
            claimed = sorted(
                (_task(r) for r in rows), key=lambda t: (-t.priority, t.created_at, t.id)
            )
            for t in claimed:
                tx.emit("started", t, attempt=t.attempts, turn=t.turn, worker=worker_id)
        return claimed

    def settle(self, task_id: str, worker_id: str, outcome: Outcome) -> SettleResult:
        with self._write() as tx:
            head = tx.conn.execute(select(T.c.parent_id).where(T.c.id == task_id)).first()
            if head is None:
                raise TaskNotFound(task_id)
            parent_id = head[0]
            if parent_id is not None:
                self._lock_task(tx, parent_id)  # parent before child: the global lock order
            task = self._lock_task(tx, task_id)
            assert task is not None
            if task.status != Status.IN_PROGRESS or task.worker_id != worker_id:
                return SettleResult(False, task)
            done = {"worker_id": None, "lease_expires_at": None, "updated_at": tx.now}
            woke: list[str] = []
            if outcome.kind in ("done", "failed"):
                status = Status.DONE if outcome.kind == "done" else Status.FAILED
                tx.conn.execute(
                    update(T)
                    .where(T.c.id == task_id)
                    .values(
                        status=str(status),
                        result=outcome.result,
                        error=outcome.error,
                        files=json.dumps(list(outcome.files)),
                        finished_at=tx.now,
                        **done,
                    )
                )
                if status == Status.DONE:
                    tx.emit("completed", task, result=outcome.result, files=list(outcome.files))
                else:
                    tx.emit("failed", task, error=outcome.error)
                woke = self._wake_if_done(tx, parent_id)
            elif outcome.kind == "yielded":
                still_open = self._open_children(tx.conn, task_id)
                status = Status.WAITING if still_open else Status.TODO
                tx.conn.execute(
                    update(T)
                    .where(T.c.id == task_id)
                    .values(status=str(status), turn=T.c.turn + 1, **done)
                )
                tx.emit("waiting", task, open_subtasks=still_open)
                if not still_open:  # invariant 2: reports all finished before the turn ended
                    tx.emit("woken", task, immediately=True)
                    woke = [task_id]
            else:
                raise ValueError(f"unknown outcome {outcome.kind!r}")
            after = self._lock_task(tx, task_id)
        return SettleResult(True, after, woke)

    def cancel(self, task_id: str, reason: str, by: str = "user") -> list[Task]:
        with self._write() as tx:
            head = tx.conn.execute(select(T.c.parent_id).where(T.c.id == task_id)).first()
            if head is None:
                raise TaskNotFound(task_id)
            parent_id = head[0]
            if parent_id is not None:
                self._lock_task(tx, parent_id)
            sub = self._subtree_ids(task_id, open_only=True).subquery()
            if tx.locking:  # lock the subtree top-down, the same order settle uses
                tx.conn.execute(
                    select(T.c.id)
                    .join(sub, sub.c.id == T.c.id)
                    .order_by(sub.c.depth, T.c.id)
                    .with_for_update(of=T)
                )
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
            cancelled = [_task(r) for r in rows]
            for t in cancelled:
                tx.emit("cancelled", t, reason=reason, by=by)
            if cancelled:
                self._wake_if_done(tx, parent_id)
        return cancelled

    def revoke(self, task_id: str, reason: str, by: str = "user") -> list[Task]:
        """Revoke a task's authority and its whole subtree's, in one statement.

        Every task in the subtree is marked revoked (terminal ones too: the flag is a fact about
        authority, which the audit trail relies on); the open ones are also cancelled, so their
        sessions stop at their next step. Returns the tasks newly revoked.
        """
        with self._write() as tx:
            head = tx.conn.execute(select(T.c.parent_id).where(T.c.id == task_id)).first()
            if head is None:
                raise TaskNotFound(task_id)
            parent_id = head[0]
            if parent_id is not None:
                self._lock_task(tx, parent_id)
            sub = self._subtree_ids(task_id, open_only=False).subquery()
            if tx.locking:  # lock the subtree top-down, the same order settle uses
                tx.conn.execute(
                    select(T.c.id)
                    .join(sub, sub.c.id == T.c.id)
                    .order_by(sub.c.depth, T.c.id)
                    .with_for_update(of=T)
                )
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
            revoked = [_task(r) for r in rows]
            for t in revoked:
                tx.emit("revoked", t, reason=reason, by=by, origin=task_id)
            for t in revoked:  # RETURNING shows new rows: those cancelled now finished now
                if t.status == Status.CANCELLED and t.finished_at == tx.now:
                    tx.emit("cancelled", t, reason=f"revoked: {reason}", by=by)
            if revoked:
                self._wake_if_done(tx, parent_id)
        return revoked

    def recover(self, worker_alive: Callable[[str], bool | None]) -> dict[str, list[str]]:
        """Invariant 5, set-based: requeue orphaned sessions, wake managers with nothing open.

        worker_alive(worker_id) says True/False when it can tell (a process on this host), or
        None when it cannot (another machine): then only an expired lease frees the task.
        """
        with self._write() as tx:
            holders = list(
                tx.conn.execute(
                    select(T.c.worker_id).distinct().where(T.c.status == str(Status.IN_PROGRESS))
                ).scalars()
            )
            dead = [w for w in holders if w is None or worker_alive(w) is False]
            stale = or_(
                T.c.lease_expires_at < tx.now,
                T.c.worker_id.is_(None),
                T.c.worker_id.in_([w for w in dead if w is not None]),
            )
            requeued = tx.conn.execute(
                update(T)
                .where(T.c.status == str(Status.IN_PROGRESS), stale)
                .values(
                    status=str(Status.TODO),
                    worker_id=None,
                    lease_expires_at=None,
                    updated_at=tx.now,
                )
                .returning(T.c.id, T.c.assignee, T.c.attempts)
            ).all()
            for tid, assignee, attempts in requeued:
                tx.emit(
                    "requeued",
                    tid,
                    assignee,
                    attempt=attempts,
                    reason="its worker stopped before the session ended; it will be re-run",
                )
            c = T.alias("c")
            woke = tx.conn.execute(
                update(T)
                .where(
                    T.c.status == str(Status.WAITING),
                    ~exists().where(c.c.parent_id == T.c.id, c.c.status.in_(OPEN_VALUES)),
                )
                .values(status=str(Status.TODO), updated_at=tx.now)
                .returning(T.c.id, T.c.assignee)
            ).all()
            for tid, assignee in woke:
                tx.emit("woken", tid, assignee, recovered=True)
        return {"requeued": [r[0] for r in requeued], "woken": [w[0] for w in woke]}

    def renew_leases(self, worker_id: str, lease_seconds: float) -> int:
        with self._write() as tx:
            return tx.conn.execute(
                update(T)
                .where(T.c.worker_id == worker_id, T.c.status == str(Status.IN_PROGRESS))
                .values(lease_expires_at=tx.now + lease_seconds)
            ).rowcount

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

    def append_events(
        self, items: list[tuple[str, str | None, str | None, dict[str, Any]]]
    ) -> list[Event]:
        with self._write() as tx:
            tx.pending.extend(items)
        return tx.appended

    def events_after(
        self, seq: int, limit: int = 1000, task_ids: Iterable[str] | None = None
    ) -> list[Event]:
        q = select(E).where(E.c.seq > seq).order_by(E.c.seq).limit(limit)
        if task_ids is not None:
            q = q.where(E.c.task_id.in_(list(task_ids)))
        with self._read() as conn:
            return [_event(r) for r in conn.execute(q)]

    def wait_for_change(self, after_seq: int, timeout: float) -> bool:
        """Block until the log has an event after after_seq, or timeout; True if it has.

        Commits in this process wake the waiter at once; commits by other processes are
        seen by looking at the chain head every poll interval.
        """
        deadline = time.monotonic() + timeout
        while True:
            if self.last_seq() > after_seq:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._changed:
                self._changed.wait(min(remaining, self.poll_interval))

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

    def last_seq(self) -> int:
        with self._read() as conn:
            return conn.execute(select(schema.chain_head.c.seq)).scalar_one()

    # --- reads ---------------------------------------------------------------------------

    def get_task(self, task_id: str) -> Task:
        with self._read() as conn:
            row = conn.execute(select(T).where(T.c.id == task_id)).first()
        if row is None:
            raise TaskNotFound(task_id)
        return _task(row)

    def status_of(self, task_id: str) -> tuple[Status, bool] | None:
        with self._read() as conn:
            row = conn.execute(select(T.c.status, T.c.revoked).where(T.c.id == task_id)).first()
        return (Status(row[0]), bool(row[1])) if row else None

    def lineage(self, task_id: str) -> tuple[int, list[Task]]:
        """The log's head seq, then the task and its ancestors (nearest first).

        The head is read first: a revocation committed after it cannot be missing from the
        task rows read after it, so "not revoked as of seq N" is a claim the log can back.
        """
        with self._read() as conn:
            seq = conn.execute(select(schema.chain_head.c.seq)).scalar_one()
            rows = conn.execute(_LINEAGE, {"task_id": task_id}).all()
        if not rows:
            raise TaskNotFound(task_id)
        return seq, [_task(r) for r in rows]

    def children(self, task_id: str) -> list[Task]:
        with self._read() as conn:
            rows = conn.execute(
                select(T).where(T.c.parent_id == task_id).order_by(T.c.created_at, T.c.id)
            ).all()
        return [_task(r) for r in rows]

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
        return [_task(r) for r in rows]

    def ancestors(self, task_id: str) -> list[Task]:
        """The task's parent, grandparent, ... up to the root (nearest first)."""
        base = select(T.c.parent_id.label("id"), literal(1).label("depth")).where(T.c.id == task_id)
        up = base.cte("up", recursive=True)
        p = T.alias("p")
        up = up.union_all(
            select(p.c.parent_id, (up.c.depth + 1)).where(
                p.c.id == up.c.id, p.c.parent_id.is_not(None)
            )
        )
        with self._read() as conn:
            rows = conn.execute(select(T).join(up, up.c.id == T.c.id).order_by(up.c.depth)).all()
        return [_task(r) for r in rows]

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
            return [_task(r) for r in conn.execute(q)]

    def counts(self, root_id: str | None = None) -> dict[str, int]:
        q = select(T.c.status, func.count()).group_by(T.c.status)
        if root_id:
            q = q.where(T.c.root_id == root_id)
        with self._read() as conn:
            return {s: n for s, n in conn.execute(q)}
