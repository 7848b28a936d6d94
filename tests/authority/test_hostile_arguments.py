"""Arguments a model (or text injected into its prompt) controls never make a tool body run
unrecorded: they are made canonical or refused before the authority check, every body that
runs has its allowed entry in the log, and the bundle's count of allowed calls says so."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from firm.authority.check import Link, Standing, check_call
from firm.authority.grants import Grant
from firm.engine.company import build_registry
from firm.org import parse_org
from firm.session import Session
from tests.authority.hostile import ORG, run_probe, write_probe_company

NAN = float("nan")
INF = float("inf")


def deep(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = [
    # (id, tool, arguments as a brain passes them — a dict, or a model's JSON text, what the
    #  tool error must say)
    ("nan-in-an-object", "probe.table", {"data": {"x": NAN}}, "not a finite number"),
    ("nan-unannotated", "probe.echo", {"value": NAN}, "not a finite number"),
    ("infinity-in-a-list", "probe.echo", {"value": [1, -INF]}, "not a finite number"),
    ("nan-literal-in-json", "probe_echo", '{"value": NaN}', "not a finite number"),
    ("infinity-literal-in-json", "probe_echo", '{"value": Infinity}', "not a finite number"),
    ("overflowing-float-in-json", "probe_echo", '{"value": 1e400}', "not a finite number"),
    ("lone-surrogate", "probe.echo", {"value": "x\ud800y"}, "lone surrogate"),
    ("lone-surrogate-escaped-in-json", "probe_echo", '{"value": "\\udfff"}', "lone surrogate"),
    ("lone-surrogate-in-a-key", "probe.table", {"data": {"\ud800": 1}}, "lone surrogate"),
    ("lone-surrogate-in-a-name", "probe.echo", {"value": 1, "\udc00": 2}, "lone surrogate"),
    ("a-set", "probe.echo", {"value": {1, 2}}, "not a JSON value"),
    ("an-object", "probe.echo", {"value": object()}, "not a JSON value"),
    ("a-non-string-key", "probe.table", {"data": {1: "one"}}, "keys must be strings"),
    ("deep-nesting", "probe.echo", {"value": deep(500)}, "nested deeper than"),
    ("deep-nesting-in-json", "probe_echo", '{"value": ' + "[" * 50_000, "nested deeper than"),
    ("a-huge-int", "probe.echo", {"value": 10**5000}, "integer"),
    ("a-huge-int-in-json", "probe_echo", '{"value": ' + "9" * 5000 + "}", "integer"),
    ("too-large", "probe.echo", {"value": "x" * 9_000_000}, "bytes"),
    ("a-duplicate-key-in-json", "probe_echo", '{"value": 1, "value": 2}', "twice"),
]


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [case[1:] for case in HOSTILE],
    ids=[case[0] for case in HOSTILE],
)
def test_hostile_arguments_are_refused_before_any_body_runs_and_the_refusal_is_logged(
    tmp_path: Path, tool: str, arguments: Any, message: str
) -> None:
    out = run_probe(tmp_path, [(tool, arguments), ("probe.echo", {"value": 1})])
    refused, fine = out.brain.results("solo", tool)[0], out.brain.results("solo", "probe.echo")[-1]
    assert not refused.ok and message in refused.content, refused.content
    assert fine.ok  # the session carried on: the model can act on the error
    assert out.root.status == "done"
    assert out.ran == ["probe.echo"]  # only the well-formed call's body ran
    assert len([e for e in out.entries("tool_error") if message in e.data["error"]]) == 1
    assert out.report.verified, [c.line() for c in out.report.checks]
    assert len(out.allowed("probe.echo")) == 1
    # Every body that ran, and nothing else, is an allowed call in the bundle (+ complete_task).
    assert out.verified_allowed == len(out.ran) + 1 == len(out.allowed())


def test_a_nan_never_passes_a_ceiling(tmp_path: Path) -> None:
    out = run_probe(
        tmp_path,
        [
            ("probe.rows", {"rows": NAN}),
            ("probe_rows", '{"rows": NaN}'),
            ("probe.rows", {"rows": INF}),
            ("probe.rows", {"rows": 500}),
            ("probe.rows", {"rows": 50}),
        ],
    )
    nan, nan_text, inf, above, fine = [r for _, t, r in out.brain.calls if "rows" in t]
    assert [r.ok for r in (nan, nan_text, inf, above, fine)] == [False] * 4 + [True]
    assert "not a finite number" in nan.content and "not a finite number" in inf.content
    assert "ceiling_exceeded" in above.content
    assert out.ran == ["probe.rows"]
    assert out.verified_allowed == len(out.ran) + 1


@pytest.mark.parametrize("value", [NAN, INF, -INF], ids=["nan", "inf", "-inf"])
def test_the_check_refuses_a_ceiling_value_that_is_not_a_finite_number(
    tmp_path: Path, value: float
) -> None:
    # The check on its own, as a caller other than the session (or a future one) uses it.
    company = write_probe_company(tmp_path / "co")
    org = parse_org(ORG, str(company.org_path))
    rows = build_registry(org, company.folder).find("probe.rows")
    assert rows is not None
    grant = Grant(scopes=("probe.*",), limits={"max_rows": 100})
    standing = Standing("T-1", "solo", grant, (Link("T-1", None, False),), None, 0, 0.0)
    denial = check_call(org, standing, rows, {"rows": value}, frozenset({"rows"}))
    assert denial is not None and denial.code == "ceiling_exceeded"
    assert "finite" in denial.reason
    assert check_call(org, standing, rows, {"rows": 100}, frozenset({"rows"})) is None


def test_a_result_the_log_cannot_hold_as_is_is_still_recorded(tmp_path: Path) -> None:
    out = run_probe(tmp_path, [("probe.garble", {})])
    (result,) = out.brain.results("solo", "probe.garble")
    assert result.ok and "\ud800" not in result.content and "a surrogate" in result.content
    assert out.ran == ["probe.garble"] and len(out.allowed("probe.garble")) == 1
    assert out.report.verified
    assert out.verified_allowed == len(out.ran) + 1


def test_a_tool_name_the_log_cannot_hold_is_refused_and_logged(tmp_path: Path) -> None:
    out = run_probe(tmp_path, [("probe\ud800", {}), ("x" * 100_000, {})])
    surrogate, huge = [r for _, _, r in out.brain.calls][:2]
    assert not surrogate.ok and "there is no tool" in surrogate.content
    assert not huge.ok and len(huge.content) < 2000
    errors = out.entries("tool_error")
    assert len(errors) == 2 and all(len(e.data["tool"]) <= 200 for e in errors)
    assert out.root.status == "done" and out.report.verified


def test_a_final_message_the_log_cannot_hold_still_ends_the_task(tmp_path: Path) -> None:
    out = run_probe(tmp_path, lambda session: "all done \ud800 here")
    assert out.root.status == "done"
    assert out.root.result is not None and out.root.result.startswith("all done")
    assert "\ud800" not in out.root.result


def test_calls_after_complete_task_are_refused_logged_and_never_run(tmp_path: Path) -> None:
    def script(session: Session) -> None:
        session.call("complete_task", {"result": "finished"})
        session.call("probe.echo", {"value": "too late"})
        session.call("fail_task", {"reason": "changed my mind"})

    out = run_probe(tmp_path, script)
    assert out.root.status == "done" and out.root.result == "finished"
    assert out.ran == []  # the body after complete_task never ran
    refused = [e for e in out.entries("tool_error") if "already ended" in e.data["error"]]
    assert [e.data["tool"] for e in refused] == ["probe.echo", "fail_task"]
    # Logged in order: the completion first, then what came after it.
    complete = [e for e in out.allowed() if e.data["tool"] == "complete_task"]
    assert len(complete) == 1 and all(complete[0].seq < e.seq for e in refused)
    assert out.report.verified and out.verified_allowed == 1


def test_recorded_arguments_are_the_canonical_ones(tmp_path: Path) -> None:
    # The same arguments, spelled two ways (key order, spacing, a tuple for a list), have
    # one digest in the log.
    out = run_probe(
        tmp_path,
        [
            ("probe.table", {"data": {"b": [1, 2], "a": "é"}}),
            ("probe_table", json.dumps({"data": {"a": "é", "b": (1, 2)}}, indent=2)),
        ],
    )
    first, second = out.allowed("probe.table")
    assert first.data["args_digest"] == second.data["args_digest"]
    assert out.verified_allowed == 3 and math.isfinite(first.data["checked_at"])
