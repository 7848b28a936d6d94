"""Schema 1, revision 0005: a cancel is one log entry, and the tasks it ended name it.

A cancel writes one `cancelled` entry on the subtree's root saying how many tasks it ended and
the digest of their ids; each ended row keeps that entry's seq in `cancelled_by_seq` (indexed),
so the set is read back with one seek. Entries written before (one per task) stay as they are.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("cancelled_by_seq", sa.Integer))
    op.create_index("ix_tasks_cancelled_by_seq", "tasks", ["cancelled_by_seq"])


def downgrade() -> None:
    op.drop_index("ix_tasks_cancelled_by_seq", "tasks")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("cancelled_by_seq")
