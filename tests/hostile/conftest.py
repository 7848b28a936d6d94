"""Hostile inputs: each test reproduces one finding of the adversarial review (issue 11)."""

from tests.audit.conftest import audited  # noqa: F401  (the fixture, shared)
