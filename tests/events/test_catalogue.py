"""The catalogue itself: every kind has a schema that fits the store, and the code names kinds
only through it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import firm
from firm.events import (
    CATALOGUE,
    CREATION,
    ENDINGS,
    KIND_MAX_LENGTH,
    TO_TODO,
    EventKind,
    InvalidEvent,
    catalogue_data,
    validate,
)
from firm.store.schema import events as E
from firm.tasks import Status

SRC = Path(firm.__file__).parent
KIND_VALUES = {k.value for k in EventKind}


def test_every_kind_is_catalogued_and_fits_the_kind_column() -> None:
    assert set(CATALOGUE) == set(EventKind)
    assert E.c.kind.type.length == KIND_MAX_LENGTH
    assert all(len(k) <= KIND_MAX_LENGTH for k in EventKind)
    for kind, spec in CATALOGUE.items():
        assert spec.kind is kind and spec.doc
        schema = catalogue_data()["kinds"][kind]["data"]
        assert schema["type"] == "object" and schema.get("additionalProperties") is False


def test_the_groups_follow_from_the_statuses() -> None:
    assert {EventKind.CREATED, EventKind.DELEGATED} == CREATION
    # A decision may approve a plan, whose subtasks then wait for a worker.
    assert {
        EventKind.CREATED,
        EventKind.DELEGATED,
        EventKind.WOKEN,
        EventKind.REQUEUED,
        EventKind.APPROVAL_DECIDED,
    } == TO_TODO
    assert {EventKind.COMPLETED, EventKind.FAILED, EventKind.CANCELLED} == ENDINGS
    assert {s.status for s in CATALOGUE.values()} - {None} == set(Status)


def test_optional_keys_may_be_left_out_and_keywords_are_keys() -> None:
    assert validate("woken", {}) is EventKind.WOKEN
    assert validate("woken", {"recovered": True}) is EventKind.WOKEN
    data = {"turn": 2, "from": "json_schema", "to": "json_object", "error": "400"}
    assert validate("manager_output_downgraded", data) is EventKind.MANAGER_OUTPUT_DOWNGRADED
    with pytest.raises(InvalidEvent, match="from: Field required"):
        validate("manager_output_downgraded", {"turn": 2, "to": "text", "error": "400"})


def _literal_kinds(node: ast.AST) -> list[str]:
    """The event kinds a node spells as string literals (alone, or in a tuple/list/set)."""
    if isinstance(node, ast.Constant) and node.value in KIND_VALUES:
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [k for elt in node.elts for k in _literal_kinds(elt)]
    return []


def _kind_literals_in(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        # A writer: tx.emit("kind", ...) or an entry tuple ("kind", task, agent, data).
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "emit":
            found += [(node.lineno, k) for k in _literal_kinds(node.args[0])] if node.args else []
        if isinstance(node, ast.Tuple) and len(node.elts) == 4:
            found += [(node.lineno, k) for k in _literal_kinds(node.elts[0])]
        # A reader: e.kind == "kind", e.kind in ("a", "b"), and the like. (An Outcome's kind
        # — done, failed, yielded — is not an event kind.)
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            kinds = [
                s
                for s in sides
                if isinstance(s, ast.Attribute)
                and s.attr == "kind"
                and getattr(s.value, "id", None) != "outcome"
            ]
            if kinds:
                found += [(node.lineno, k) for s in sides for k in _literal_kinds(s)]
    return found


def test_the_code_names_event_kinds_only_through_the_catalogue() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "events.py" and path.parent == SRC:
            continue
        for line, kind in _kind_literals_in(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.relative_to(SRC.parent)}:{line}: {kind!r}")
    assert offenders == [], "use firm.events.EventKind instead of:\n" + "\n".join(offenders)


def test_the_scan_finds_what_it_looks_for() -> None:
    """The check above would see a literal kind, written or read."""
    source = """
tx.emit("woken", task)
store.append_events([("thought", tid, agent, {"text": "hi"})])
if e.kind in ("completed", "failed"):
    pass
if outcome.kind == "failed":
    pass
"""
    found = sorted(k for _, k in _kind_literals_in(ast.parse(source)))
    assert found == ["completed", "failed", "thought", "woken"]  # not the Outcome's "failed"
