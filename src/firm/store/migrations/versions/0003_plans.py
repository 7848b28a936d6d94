"""Schema 1, revision 0003: approved delegations. A subtask delegated under a plan that waits
for a person names it in `held_by_plan` and is not claimed until the plan is approved.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("held_by_plan", sa.String(32)))
    op.create_index("ix_tasks_held_by_plan", "tasks", ["held_by_plan"])


def downgrade() -> None:
    op.drop_index("ix_tasks_held_by_plan", "tasks")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("held_by_plan")
