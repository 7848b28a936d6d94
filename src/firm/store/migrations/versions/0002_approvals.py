"""Schema 1, revision 0002: the approvals table (tool calls that wait for a person).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("root_id", sa.String(32), nullable=False),
        sa.Column("task_id", sa.String(32), nullable=False),
        sa.Column("agent", sa.String(64), nullable=False),
        sa.Column("turn", sa.Integer, nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("args", sa.Text, nullable=False),
        sa.Column("args_digest", sa.String(64), nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("rule", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("dedupe_key", sa.String(64), unique=True),
        sa.Column("requested_at", sa.Float, nullable=False),
        sa.Column("timeout_at", sa.Float),
        sa.Column("decided_at", sa.Float),
        sa.Column("decided_by", sa.String(200)),
        sa.Column("note", sa.Text),
        sa.Column("claimed_by", sa.String(128)),
        sa.Column("result", sa.Text),
        sa.Column("ok", sa.Boolean),
    )
    op.create_index("ix_approvals_root_id", "approvals", ["root_id"])
    op.create_index("ix_approvals_task_id", "approvals", ["task_id"])
    op.create_index("ix_approvals_status", "approvals", ["status", "timeout_at"])


def downgrade() -> None:
    op.drop_table("approvals")
