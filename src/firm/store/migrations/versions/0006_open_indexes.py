"""Schema 2, revision 0006: the indexes on status hold open tasks only.

A task that ends was moved inside each index on status (to its new status's place), and a
cancel of 10,000 tasks moved 10,000 entries in each, and added one to the index on
cancelled_by_seq: most of its time. Now:
- the claim index, open-children and open-by-status indexes are partial (todo and not held
  by a plan; open): an ended task is deleted from them, and is in none of them after;
- lookups by parent or by run, whatever the status, have plain indexes, which never change;
- cancelled_by_seq has no index: a cancel's tasks are found down the subtree of its entry's
  task (an export asks once per cancel entry; nothing hot asks).

Queries use the partial indexes only when they say the index's predicate in its own terms,
with the statuses written into the SQL (store/schema.py: is_open, claimable).

`meta.schema_version` becomes 2: a `cancelled` entry may end a whole subtree since 0005,
which a firm reading only that number would misread.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_status: sa.ColumnClause[str] = sa.column("status")
_OPEN = sa.or_(
    *(_status == sa.literal_column(f"'{v}'") for v in ("in_progress", "todo", "waiting"))
)
_CLAIMABLE = sa.and_(_status == sa.literal_column("'todo'"), sa.column("held_by_plan").is_(None))


def _where(predicate: sa.ColumnElement[bool]) -> dict[str, Any]:
    return {"sqlite_where": predicate, "postgresql_where": predicate}


def _schema_version(value: str) -> None:
    op.execute(
        sa.text("UPDATE meta SET value = :v WHERE key = 'schema_version'").bindparams(v=value)
    )


def upgrade() -> None:
    op.drop_index("ix_tasks_claim", "tasks")
    op.drop_index("ix_tasks_parent_status", "tasks")
    op.drop_index("ix_tasks_root_status", "tasks")
    op.drop_index("ix_tasks_cancelled_by_seq", "tasks")
    op.create_index("ix_tasks_parent_id", "tasks", ["parent_id"])
    op.create_index("ix_tasks_root_id", "tasks", ["root_id"])
    op.create_index(
        "ix_tasks_claim",
        "tasks",
        ["status", sa.column("priority").desc(), "created_at", "id"],
        **_where(_CLAIMABLE),
    )
    op.create_index("ix_tasks_parent_open", "tasks", ["parent_id", "status"], **_where(_OPEN))
    op.create_index("ix_tasks_open", "tasks", ["status", "root_id"], **_where(_OPEN))
    _schema_version("2")


def downgrade() -> None:
    _schema_version("1")
    op.drop_index("ix_tasks_open", "tasks")
    op.drop_index("ix_tasks_parent_open", "tasks")
    op.drop_index("ix_tasks_claim", "tasks")
    op.drop_index("ix_tasks_root_id", "tasks")
    op.drop_index("ix_tasks_parent_id", "tasks")
    op.create_index("ix_tasks_cancelled_by_seq", "tasks", ["cancelled_by_seq"])
    op.create_index("ix_tasks_root_status", "tasks", ["root_id", "status"])
    op.create_index("ix_tasks_parent_status", "tasks", ["parent_id", "status"])
    op.create_index(
        "ix_tasks_claim", "tasks", ["status", sa.column("priority").desc(), "created_at", "id"]
    )
