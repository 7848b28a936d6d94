"""Tools built from a JSON schema, and tool sources with a lifecycle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from firm.api import Firm
from firm.errors import FirmError, ToolError
from firm.org import OrgChart, parse_org
from firm.tasks import Status
from firm.tools import SchemaError, ToolDef, register_tool_source, schema_tool

OBJECT = {"type": "object"}


def _echo(arguments: dict[str, Any]) -> str:
    return repr(arguments)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, "must have type 'object'"),
        ({**OBJECT, "properties": {"a": {"not": {"type": "string"}}}}, "properties.a: unsupported"),
        ({**OBJECT, "properties": {"a": {"oneOf": [{"type": "string"}]}}}, "'oneOf'"),
        ({**OBJECT, "properties": {"a": {"$ref": "other.json#/x"}}}, "only local references"),
        (
            {
                **OBJECT,
                "properties": {"a": {"$ref": "#/$defs/n"}},
                "$defs": {"n": {"$ref": "#/$defs/n"}},
            },
            "recursive reference",
        ),
        ({**OBJECT, "properties": {"a": {"type": "string", "minimum": 1}}}, "'minimum' does not"),
        ({**OBJECT, "patternProperties": {"^x": {}}}, "'patternProperties'"),
        ({**OBJECT, "properties": {}, "required": ["b"]}, "required 'b' is not among"),
        ({**OBJECT, "properties": {"a": {"type": "widget"}}}, "unknown type 'widget'"),
    ],
)
def test_a_schema_firm_cannot_check_is_refused_with_where(
    schema: dict[str, Any], expected: str
) -> None:
    with pytest.raises(SchemaError, match=r"tool 'x\.y'") as err:
        schema_tool("x.y", "X.", schema, _echo)
    assert expected in str(err.value)


def test_limits_must_bound_a_number_argument() -> None:
    schema = {**OBJECT, "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}}
    with pytest.raises(FirmError, match="not a number argument"):
        schema_tool("x.y", "X.", schema, _echo, limits={"q": "max_q"})
    with pytest.raises(FirmError, match="not one of its arguments"):
        schema_tool("x.y", "X.", schema, _echo, limits={"m": "max_m"})
    assert schema_tool("x.y", "X.", schema, _echo, limits={"n": "max_n"}).limits == {"n": "max_n"}


def test_references_nesting_and_bounds_are_checked_strictly() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Range": {
                "type": "object",
                "properties": {"low": {"type": "number"}, "high": {"type": "number"}},
                "required": ["low"],
            }
        },
        "properties": {
            "range": {"$ref": "#/$defs/Range"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "note": {"type": ["string", "null"], "maxLength": 5},
            "meta": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
    }
    t = ToolDef.from_schema("x.y", "X.", schema, _echo)
    args, given = t.parse({"range": {"low": 1, "high": 2.5}, "note": None, "meta": {"a": 1}})
    assert args == {"range": {"low": 1, "high": 2.5}, "note": None, "meta": {"a": 1}}
    assert isinstance(args["range"]["low"], int)  # a number stays what was sent
    assert given == {"range", "note", "meta"}
    bad = [
        ({"range": {"high": 2}}, "missing required argument 'range.low'"),
        ({"range": {"low": 1, "mid": 2}}, "unexpected argument 'range.mid'"),
        ({"range": {"low": "1"}}, "argument 'range.low'"),
        ({"tags": ["a", "a"]}, "items must be unique"),
        ({"note": "too long"}, "argument 'note'"),
        ({"meta": {"a": True}}, "argument 'meta.a'"),
    ]
    for arguments, expected in bad:
        with pytest.raises(ToolError) as err:
            t.parse(arguments)
        assert expected in str(err.value), (arguments, str(err.value))


class _Recorder:
    def __init__(self, name: str, log: list[str], fail: bool = False):
        self.name = name
        self.log = log
        self.fail = fail

    def open(self) -> list[ToolDef]:
        self.log.append(f"open {self.name}")
        if self.fail:
            raise RuntimeError("the server would not start")
        schema = {**OBJECT, "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        return [schema_tool(f"{self.name}.double", "Double n.", schema, lambda a: 2 * a["n"])]

    def close(self) -> None:
        self.log.append(f"close {self.name}")


ORG = """\
company: {company}
agents:
  - {{id: boss, name: Bo, title: Manager, tools: ["calc.*", "files.*"]}}
"""


@pytest.fixture
def sources_log() -> Iterator[list[str]]:
    log: list[str] = []

    def factory(org: OrgChart, base_dir: Path | None) -> list[_Recorder]:
        if org.company == "Sourced Co":
            return [_Recorder("calc", log)]
        if org.company == "Broken Co":
            return [_Recorder("calc", log), _Recorder("bad", log, fail=True)]
        return []

    remove = register_tool_source("test-recorder", factory)
    yield log
    remove()


def test_a_registered_source_provides_tools_and_is_closed_when_the_engine_stops(
    tmp_path: Path, sources_log: list[str]
) -> None:
    from tests.authority.scripted import ScriptedBrain

    brain = ScriptedBrain({"boss": [("calc_double", {"n": 21})]})
    org = parse_org(ORG.format(company="Sourced Co"), "<test>")
    with Firm(tmp_path / "firm.db", brain=brain) as firm:
        root = firm.run(org, "Double it", workspace=tmp_path / "ws", timeout=60)
        assert root.status == Status.DONE, root.error
        assert sources_log == ["open calc"]
    assert brain.results("boss", "calc_double")[0].content == "42"
    assert sources_log == ["open calc", "close calc"]


def test_a_source_that_cannot_open_fails_the_submission_and_closes_the_others(
    tmp_path: Path, sources_log: list[str]
) -> None:
    org = parse_org(ORG.format(company="Broken Co"), "<test>")
    with (
        Firm(tmp_path / "firm.db") as firm,
        pytest.raises(FirmError, match="bad cannot start: the server would not start"),
    ):
        firm.submit(org, "Double it", workspace=tmp_path / "ws")
    assert sources_log == ["open calc", "open bad", "close calc", "close bad"]
