"""A tool described by a JSON schema (as MCP servers and CrewAI tools describe theirs), offered
to the llm brain through the grant, called well and badly, with a ceiling on an argument."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

from firm.org import OrgChart
from firm.tasks import Status
from firm.testing import ModelServer, ScriptedModel, call, calls, complete

from .conftest import Runner

TOOLS = """
import json
from pathlib import Path

from firm.tools import schema_tool

SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "description": "What to look for."},
        "rows": {"type": "integer", "minimum": 1},
        "site": {"enum": ["docs", "blog"]},
    },
    "required": ["query"],
}


def _search(arguments, context):
    with open(Path(__file__).with_name("calls.jsonl"), "a") as f:
        f.write(json.dumps({"args": arguments, "task": context.task_id}) + "\\n")
    return f"{arguments.get('rows', 10)} pages about {arguments['query']}"


search = schema_tool(
    "web.search", "Search the web.", SCHEMA, _search,
    limits={"rows": "max_results"}, takes_context=True,
)
"""

ORG = """\
company: Search Co
tool_modules: [search_tools.py]
agents:
  - {id: boss, name: Bo, title: Manager, tools: ["web.*", "files.*"]}
  - {id: eng, name: Eve, title: Engineer, reports_to: boss, tools: ["web.*", "files.*"]}
"""


def _company(tmp_path: Path, org_factory: Callable[[str], OrgChart]) -> OrgChart:
    (tmp_path / "search_tools.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    return org_factory(ORG)


def test_a_schema_tool_is_offered_validated_bounded_and_run(
    tmp_path: Path,
    org_factory: Callable[[str], OrgChart],
    model: ScriptedModel,
    server: ModelServer,
    run_llm: Runner,
) -> None:
    org = _company(tmp_path, org_factory)
    model.when(agent="boss", step=0).reply(
        calls(
            call("web_search", query="", rows=3),  # too short
            call("web_search", query="notes", rows="3"),  # a string for an integer
            call("web_search", query="notes", site="news"),  # not one of the enum
            call("web_search", query="notes", rows=3, depth=2),  # not an argument
            call("web_search", query="notes", rows=50),  # above the grant's ceiling
            call("web_search", query="notes", rows=3, site="docs"),
        )
    )
    model.when(agent="boss", step=1).reply(calls(complete("found")))

    root = run_llm(org, to="boss", grant={"limits": {"max_results": 5}})

    assert root.status == Status.DONE, root.error
    first, second = server.requests_for("boss")[:2]
    offered = first.request.tool("web_search")
    assert offered is not None and offered["description"] == "Search the web."
    assert offered["parameters"]["properties"]["query"]["minLength"] == 1
    assert offered["parameters"]["additionalProperties"] is False
    short, as_text, not_enum, extra, too_many, good = second.request.tool_results
    assert "argument 'query'" in short and "at least 1 character" in short
    assert "argument 'rows'" in as_text and "integer" in as_text
    assert "argument 'site'" in not_enum
    assert "unexpected argument 'depth'" in extra
    assert "rows=50 is above the ceiling max_results = 5" in too_many
    assert good == "3 pages about notes"
    # Only the good call reached the tool, with the arguments given and nothing else.
    ran = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert ran == [{"args": {"query": "notes", "rows": 3, "site": "docs"}, "task": root.id}]


def test_a_schema_tool_outside_the_grant_is_not_offered(
    tmp_path: Path,
    org_factory: Callable[[str], OrgChart],
    model: ScriptedModel,
    server: ModelServer,
    run_llm: Runner,
) -> None:
    org = _company(tmp_path, org_factory)
    model.when(agent="boss", step=0).reply(calls(call("web_search", query="notes")))
    model.when(agent="boss", step=1).reply(calls(complete("could not search")))

    root = run_llm(org, to="boss", grant={"tools": ["files.*"]})

    assert root.status == Status.DONE, root.error
    first, second = server.requests_for("boss")[:2]
    assert "web_search" not in first.request.tool_names
    assert "web.search is not in the authority granted" in second.request.tool_results[0]
    assert not (tmp_path / "calls.jsonl").exists()
