"""Alembic migrations for the store, shipped in the package (run by firm.store.migrate)."""
