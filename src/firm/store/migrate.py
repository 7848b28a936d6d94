"""Schema migrations (Alembic) for both backends, and the check every store does on open.

The revision a database is at lives in Alembic's `alembic_version` table. SQLite stores migrate
themselves when opened, so zero set-up stays zero; a PostgreSQL database is shared by many
workers, so it is migrated on purpose with `firm db upgrade` and a store that finds it behind
says so. An upgrade holds a lock for its whole transaction (BEGIN IMMEDIATE on SQLite, an
advisory lock on PostgreSQL), so two upgrades at once run one after the other and the second
finds nothing to do. `meta.schema_version` stays as the one-number summary older firms read.

A database with nothing in it is not migrated step by step: its tables are created from
store/schema.py in one pass and stamped with the head revision, without importing Alembic (the
slowest part of opening a new store). A test checks that this and the step-by-step migrations
build the same schema, on both backends.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Column, Connection, Engine, MetaData, String, Table, inspect, select, text

from firm.errors import StoreError
from firm.store import schema

SCRIPTS = Path(__file__).parent / "migrations"
_LOCK_KEY = 0x6669726D  # "firm": the advisory lock that serializes upgrades on PostgreSQL
GENESIS = schema.GENESIS

# Alembic's own bookkeeping table, exactly as Alembic creates it.
_alembic_version = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), primary_key=True),
)


def current_revision(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _legacy_schema(conn: Connection) -> bool:
    """A store made before migrations existed: the schema-1 tables without alembic_version."""
    if not inspect(conn).has_table("meta"):
        return False
    version = conn.execute(
        select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
    ).scalar()
    return version == "1"


def _config(conn: Connection):  # type: ignore[no-untyped-def]
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    cfg.attributes["connection"] = conn
    return cfg


def _empty(conn: Connection) -> bool:
    names = set(inspect(conn).get_table_names())
    return not names & (set(schema.metadata.tables) | {"alembic_version"})


def create_at_head(conn: Connection) -> None:
    """Create the current schema in an empty database and stamp it with the head revision."""
    if conn.dialect.name == "sqlite":  # the head is a view of the log's last entry
        tables = [t for t in schema.metadata.sorted_tables if t is not schema.chain_head]
        schema.metadata.create_all(conn, tables=tables)
        conn.execute(text(schema.SQLITE_CHAIN_HEAD_VIEW))
    else:
        schema.metadata.create_all(conn)
        conn.execute(schema.chain_head.insert().values(id=1, seq=0, hash=GENESIS))
    _alembic_version.create(conn)
    conn.execute(_alembic_version.insert().values(version_num=schema.HEAD_REVISION))
    conn.execute(
        schema.meta.insert().values(key="schema_version", value=str(schema.SCHEMA_VERSION))
    )


def upgrade(
    engine: Engine, target: str = "head", *, stepwise: bool = False
) -> tuple[str | None, str | None]:
    """Bring the schema to target; returns the revisions before and after. Idempotent.

    An empty database is created at head in one pass unless stepwise (or a target other
    than head) asks for every migration to run."""
    with engine.connect() as conn:
        conn = conn.execution_options(firm_write=True)  # SQLite: BEGIN IMMEDIATE
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
            before = current_revision(conn)
            if before is None and target == "head" and not stepwise and _empty(conn):
                create_at_head(conn)
                return None, schema.HEAD_REVISION
            if before == schema.HEAD_REVISION and target == "head":
                return before, before
            from alembic import command

            if before is None and _legacy_schema(conn):
                command.stamp(_config(conn), "0001")
                before = "0001"
            if before is not None and before not in known_revisions():
                raise newer_schema(engine, before)
            command.upgrade(_config(conn), target)
            after = current_revision(conn)
    return before, after


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return {s.revision for s in ScriptDirectory(str(SCRIPTS)).walk_revisions()}


def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(SCRIPTS)).get_current_head()


def newer_schema(engine: Engine, revision: str) -> StoreError:
    return StoreError(
        f"{safe_url(engine)} was migrated by a newer firm (schema revision {revision}; this "
        f"firm knows up to {schema.HEAD_REVISION}); upgrade firm to open it"
    )


def safe_url(engine: Engine) -> str:
    """The URL as a user writes it (no driver name), without its password."""
    url = engine.url
    if url.drivername.startswith("postgresql"):
        url = url.set(drivername="postgresql")
    return url.render_as_string(hide_password=True)
