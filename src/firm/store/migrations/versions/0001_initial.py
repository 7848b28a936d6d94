"""Schema 1: runs, tasks (grant, lease and usage columns), events (hash-chained), chain_head, meta.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

GENESIS = "0" * 64


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("org_yaml", sa.Text, nullable=False),
        sa.Column("org_source", sa.Text, nullable=False),
        sa.Column("brain", sa.String(64), nullable=False),
        sa.Column("brain_options", sa.Text, nullable=False),
        sa.Column("workspace", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("root_id", sa.String(32), nullable=False),
        sa.Column("parent_id", sa.String(32)),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("assignee", sa.String(64), nullable=False),
        sa.Column("created_by", sa.String(64), nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("language", sa.String(16), nullable=False),
        sa.Column("result", sa.Text),
        sa.Column("files", sa.Text, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float),
        sa.Column("finished_at", sa.Float),
        sa.Column("turn", sa.Integer, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("dedupe_key", sa.String(64), unique=True),
        sa.Column("grant", sa.Text),
        sa.Column("revoked", sa.Boolean, nullable=False),
        sa.Column("worker_id", sa.String(128)),
        sa.Column("lease_expires_at", sa.Float),
        sa.Column("calls", sa.Integer, nullable=False),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
    )
    op.create_index("ix_tasks_root_id", "tasks", ["root_id"])
    op.create_index("ix_tasks_parent_id", "tasks", ["parent_id"])
    op.create_index("ix_tasks_assignee", "tasks", ["assignee"])
    op.create_index("ix_tasks_claim", "tasks", ["status", "priority", "created_at"])
    op.create_table(
        "events",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("ts", sa.Float, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("task_id", sa.String(32)),
        sa.Column("agent", sa.String(64)),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    op.create_index("ix_events_task_id", "events", ["task_id"])
    chain_head = op.create_table(
        "chain_head",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    meta = op.create_table(
        "meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.bulk_insert(chain_head, [{"id": 1, "seq": 0, "hash": GENESIS}])
    op.bulk_insert(meta, [{"key": "schema_version", "value": "1"}])


def downgrade() -> None:
    for table in ("meta", "chain_head", "events", "tasks", "runs"):
        op.drop_table(table)
