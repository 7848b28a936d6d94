"""Schema migrations (Alembic) for both backends, and the check every store does on open.

The revision a database is at lives in Alembic's `alembic_version` table. SQLite stores migrate
themselves when opened, so zero set-up stays zero; a PostgreSQL database is shared by many
workers, so it is migrated on purpose with `firm db upgrade` and a store that finds it behind
says so. An upgrade holds a lock for its whole transaction (BEGIN IMMEDIATE on SQLite, an
advisory lock on PostgreSQL), so two upgrades at once run one after the other and the second
finds nothing to do. `meta.schema_version` stays as the one-number summary older firms read.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Connection, Engine, inspect, select, text

from firm.errors import StoreError
from firm.store import schema

SCRIPTS = Path(__file__).parent / "migrations"
_LOCK_KEY = 0x6669726D  # "firm": the advisory lock that serializes upgrades on PostgreSQL


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


def upgrade(engine: Engine, target: str = "head") -> tuple[str | None, str | None]:
    """Bring the schema to target; returns the revisions before and after. Idempotent."""
    from alembic import command

    with engine.connect() as conn:
        conn = conn.execution_options(firm_write=True)  # SQLite: BEGIN IMMEDIATE
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
            before = current_revision(conn)
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
