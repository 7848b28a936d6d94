"""Schema 2, revision 0009: on SQLite the chain head is a view of the log's last entry.

Every commit rewrote the head row (seq, hash) besides inserting its entries: a statement
(~37 k instructions) and one of the ~10 pages a commit writes to the WAL. On SQLite one
writer at a time holds the whole file, so the last entry is the head: the row becomes a view
of it, read by the same statements as before, and a commit inserts its entries with a
statement that adds each only where it continues the last one (store/transaction.py).

A firm from before this revision refuses to open the store (it does not know the revision);
one that had it open when it was migrated fails at its next commit (a view cannot be
updated) and writes nothing. PostgreSQL keeps its head row: its lock orders commits there.

What is persisted means the same: `meta.schema_version` stays 2.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_GENESIS = "0" * 64
_VIEW = (
    "CREATE VIEW chain_head (id, seq, hash) AS SELECT 1,"
    " coalesce((SELECT max(events.seq) FROM events), 0),"
    " coalesce((SELECT events.hash FROM events"
    " WHERE events.seq = (SELECT max(events.seq) FROM events)),"
    f" '{_GENESIS}')"
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.drop_table("chain_head")
    op.execute(_VIEW)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute("DROP VIEW chain_head")
    op.create_table(
        "chain_head",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    op.execute(
        "INSERT INTO chain_head (id, seq, hash) SELECT 1, coalesce(max(seq), 0),"
        f" coalesce((SELECT hash FROM events ORDER BY seq DESC LIMIT 1), '{_GENESIS}')"
        " FROM events"
    )
