"""Schema 1, revision 0004: indexes every hot statement seeks on, whatever the store's size.

Open subtasks of a task and open tasks of a run are found through (parent_id, status) and
(root_id, status), a task's pending requests through approvals (task_id, status) and its
notes through events (task_id, kind): each replaces a single-column index, whose lookups
use its prefix. The claim index holds the claim order in full (priority high first, then
oldest, then id), so a claim reads the first todo entries instead of sorting every todo task.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_tasks_parent_id", "tasks")
    op.drop_index("ix_tasks_root_id", "tasks")
    op.drop_index("ix_tasks_claim", "tasks")
    op.create_index("ix_tasks_parent_status", "tasks", ["parent_id", "status"])
    op.create_index("ix_tasks_root_status", "tasks", ["root_id", "status"])
    op.create_index(
        "ix_tasks_claim", "tasks", ["status", sa.column("priority").desc(), "created_at", "id"]
    )
    op.drop_index("ix_events_task_id", "events")
    op.create_index("ix_events_task_kind", "events", ["task_id", "kind"])
    op.drop_index("ix_approvals_task_id", "approvals")
    op.create_index("ix_approvals_task_status", "approvals", ["task_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_approvals_task_status", "approvals")
    op.create_index("ix_approvals_task_id", "approvals", ["task_id"])
    op.drop_index("ix_events_task_kind", "events")
    op.create_index("ix_events_task_id", "events", ["task_id"])
    op.drop_index("ix_tasks_claim", "tasks")
    op.drop_index("ix_tasks_root_status", "tasks")
    op.drop_index("ix_tasks_parent_status", "tasks")
    op.create_index("ix_tasks_claim", "tasks", ["status", "priority", "created_at"])
    op.create_index("ix_tasks_root_id", "tasks", ["root_id"])
    op.create_index("ix_tasks_parent_id", "tasks", ["parent_id"])
