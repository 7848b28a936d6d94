"""schemathesis over the OpenAPI schema: whatever it sends, no 5xx, and every answer matches
the schema. Valid and invalid requests alike, bounded to a few dozen examples per operation.

(The schema comes from the running server, so each operation's cases are drawn with
schemathesis' Hypothesis strategy inside an ordinary test rather than its lazy-fixture loader.)
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from office_kit import TOKEN, Running
from schemathesis import GenerationMode

OPERATIONS = [
    ("POST", "/api/tasks"),
    ("GET", "/api/tasks"),
    ("GET", "/api/tasks/{task_id}"),
    ("POST", "/api/tasks/{task_id}/cancel"),
    ("GET", "/api/org"),
    ("GET", "/api/events"),
    ("GET", "/api/files/{path}"),
    ("GET", "/api/runs"),
    ("GET", "/api/runs/{run_id}/events"),
    ("GET", "/api/approvals"),
    ("POST", "/api/approvals/{approval_id}/approve"),
    ("POST", "/api/approvals/{approval_id}/deny"),
    ("GET", "/api/tasks/{task_id}/notes"),
    ("POST", "/api/tasks/{task_id}/notes"),
    ("GET", "/api/questions"),
    ("POST", "/api/questions/{question_id}/answer"),
]


@pytest.fixture(scope="module")
def api_schema(office: Running):  # type: ignore[no-untyped-def]
    return schemathesis.openapi.from_url(f"{office.url}/openapi.json")


def test_the_schema_lists_every_operation(api_schema) -> None:  # type: ignore[no-untyped-def]
    listed = {(op.ok().method.upper(), op.ok().path) for op in api_schema.get_all_operations()}
    assert listed == set(OPERATIONS)


# Every operation with valid requests, and with invalid ones where it takes any input.
CASES = [
    (method, path, mode)
    for method, path in OPERATIONS
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if not (path == "/api/org" and mode == GenerationMode.NEGATIVE)
]


@pytest.mark.parametrize(("method", "path", "mode"), CASES)
def test_the_api_keeps_its_schema(api_schema, method: str, path: str, mode) -> None:  # type: ignore[no-untyped-def]
    operation = api_schema[path][method]
    auth = {"Authorization": f"Bearer {TOKEN}"}

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=25,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case) -> None:  # type: ignore[no-untyped-def]
        case.call_and_validate(headers=auth, timeout=30)

    check()
