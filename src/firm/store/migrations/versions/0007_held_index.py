"""Schema 2, revision 0007: the index on held_by_plan holds held tasks only.

held_by_plan is set on the few subtasks that wait for their plan's approval and NULL on
every other task, yet every task had an entry in its index: one more index insert per task
delegated, and pages of NULLs in every store. Now only tasks that name a plan are in it
(partial, `held_by_plan IS NOT NULL`); what asks by it asks for one plan's tasks
(`held_by_plan = :plan`, which implies the predicate on both backends) or whether a task is
held, and a NULL was never asked for.

What is persisted means the same: `meta.schema_version` stays 2.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_HELD = sa.column("held_by_plan").is_not(None)


def upgrade() -> None:
    op.drop_index("ix_tasks_held_by_plan", "tasks")
    op.create_index(
        "ix_tasks_held_by_plan",
        "tasks",
        ["held_by_plan"],
        sqlite_where=_HELD,
        postgresql_where=_HELD,
    )


def downgrade() -> None:
    op.drop_index("ix_tasks_held_by_plan", "tasks")
    op.create_index("ix_tasks_held_by_plan", "tasks", ["held_by_plan"])
