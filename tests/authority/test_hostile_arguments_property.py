"""A property: whatever JSON-ish values a model sends — NaN, infinities, lone surrogates, deep
nesting, huge numbers, as a mapping or as JSON text — no tool body runs without its allowed
entry in the log, every call leaves exactly one entry, and the exported bundle's verified
count of allowed calls equals the bodies that ran."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.authority.hostile import CALL_KINDS, run_probe


def _nest(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = {"k": value} if depth % 2 else [value]
    return value


_texts = st.text(st.characters(exclude_categories=()), max_size=12) | st.sampled_from(
    ["\ud800", "a\udfffb", "\x00", "é", ""]
)
_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([-(2**64), 2**63 - 1])
    | st.sampled_from([4400, 5000]).map(lambda digits: 10**digits)
    | st.floats(allow_nan=True, allow_infinity=True)
    | _texts
)
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_texts, inner, max_size=4),
    max_leaves=12,
)
_deep = st.builds(_nest, _values, st.integers(min_value=40, max_value=300))


def _as_model_text(value: Any) -> str | None:
    """The arguments as a model would spell them (NaN literals, surrogate escapes), when they
    have a JSON spelling at all."""
    try:
        return json.dumps({"value": value}, allow_nan=True)
    except (ValueError, TypeError, RecursionError):
        return None


_call = st.tuples(st.sampled_from(["probe.echo", "probe.table", "probe.rows"]), _values | _deep)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(calls=st.lists(st.tuples(_call, st.booleans()), min_size=1, max_size=6))
def test_no_body_runs_without_its_entry_and_the_bundle_counts_the_bodies(
    calls: list[tuple[tuple[str, Any], bool]],
) -> None:
    script: list[tuple[str, Any]] = []
    for (tool, value), as_text in calls:
        name = {"probe.table": "data", "probe.rows": "rows"}.get(tool, "value")
        spelled = _as_model_text(value) if as_text else None
        if spelled is not None:
            script.append((tool.replace(".", "_"), spelled.replace('"value"', f'"{name}"', 1)))
        else:
            script.append((tool, {name: value}))
    with tempfile.TemporaryDirectory() as folder:
        out = run_probe(Path(folder), script)

    assert out.root.status == "done", out.root.error  # no hostile value crashed the session
    probe_entries = [e for e in out.entries(*CALL_KINDS) if e.data["tool"].startswith("probe")]
    assert len(probe_entries) == len(script)  # one entry per call, whatever happened to it
    assert len(out.allowed()) - 1 == len(out.ran)  # every body that ran is an allowed call
    assert sorted(e.data["tool"] for e in out.allowed() if e.data["tool"] != "complete_task") == (
        sorted(out.ran)
    )
    assert out.report.verified, [c.line() for c in out.report.checks]
    assert out.verified_allowed == len(out.ran) + 1  # + complete_task
