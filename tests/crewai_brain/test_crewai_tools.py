"""A CrewAI tool brought in with firm.tools.from_crewai is a firm tool like any other: offered
through the grant, checked against its limits, audited — under the llm brain and the crewai one."""

from __future__ import annotations

from pathlib import Path

import pytest

from firm.api import Firm
from firm.errors import FirmError
from firm.org import load_org
from firm.tasks import Status
from firm.testing import ModelServer, ScriptedModel, call, calls, complete
from firm.tools import from_crewai
from tests.support import events_of

from .conftest import Runner

TOOLS = """\
from crewai.tools import BaseTool
from pydantic import BaseModel, Field

from firm.tools import from_crewai


class SearchArgs(BaseModel):
    query: str = Field(description="what to look for")
    max_results: int = Field(default=5, description="how many results")


class Search(BaseTool):
    name: str = "Search the web"
    description: str = "Search the web and return the top results."
    args_schema: type[BaseModel] = SearchArgs

    def _run(self, query: str, max_results: int = 5) -> str:
        return f"{max_results} results for {query}"


search = from_crewai(Search(), name="web.search", limits={"max_results": "max_results"})
"""

ORG = """\
company: Search Co
tool_modules: [web_tools.py]
agents:
  - {id: lead, name: Lee, title: Research Lead, tools: ["web.*"]}
  - {id: analyst, name: Ana, title: Analyst, reports_to: lead, tools: ["web.*"]}
"""


@pytest.mark.parametrize("brain", ["llm", "crewai"])
def test_a_crewai_tool_runs_through_the_grant_under_either_brain(
    brain: str,
    tmp_path: Path,
    model: ScriptedModel,
    server: ModelServer,
    firm: Firm,
    run_crewai: Runner,
) -> None:
    (tmp_path / "web_tools.py").write_text(TOOLS)
    (tmp_path / "company.yaml").write_text(ORG)
    org = load_org(tmp_path / "company.yaml")
    model.when(agent="analyst").reply(
        calls(call("web_search", query="note apps", max_results=50)),  # above its ceiling
        calls(call("web_search", query="note apps", max_results=3)),
        calls(complete("Found 3 note apps")),
    )

    root = run_crewai(
        org, "Research", to="analyst", brain=brain, grant={"limits": {"max_results": 10}}
    )

    assert root.status == Status.DONE, root.error
    asks = server.requests_for("analyst")
    assert "web_search" in asks[0].request.tool_names
    assert asks[1].request.tool_results[0].startswith("error")
    assert asks[2].request.tool_results == ["3 results for note apps"]
    assert [e.data["tool"] for e in events_of(firm, "tool_denied", root.id)] == ["web.search"]
    ran = [e for e in events_of(firm, "tool_call", root.id) if e.data["tool"] == "web.search"]
    assert len(ran) == 1 and ran[0].data["ok"]


def test_a_crewai_tool_outside_the_grant_is_not_offered(
    tmp_path: Path, model: ScriptedModel, server: ModelServer, run_crewai: Runner
) -> None:
    (tmp_path / "web_tools.py").write_text(TOOLS)
    (tmp_path / "company.yaml").write_text(ORG)
    org = load_org(tmp_path / "company.yaml")
    model.when(agent="analyst").reply(calls(complete("nothing to search with")))
    root = run_crewai(org, "Research", to="analyst", grant={"tools": ["files.*"]})
    assert root.status == Status.DONE, root.error
    assert "web_search" not in server.requests_for("analyst")[0].request.tool_names


def test_from_crewai_refuses_what_is_not_a_crewai_tool() -> None:
    with pytest.raises(FirmError, match="needs a CrewAI tool"):
        from_crewai(lambda query: query, name="web.search")
