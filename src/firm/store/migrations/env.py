"""Alembic's entry point. firm.store.migrate hands it an open connection inside a transaction
(holding the migration lock); nothing here opens connections of its own."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=None,
    # SQLite cannot ALTER most things in place; batch mode copies the table instead.
    render_as_batch=connection.dialect.name == "sqlite",
    transaction_per_migration=False,
)
with context.begin_transaction():
    context.run_migrations()
