"""With CrewAI driving, every tool call still goes through firm's checked path: what the
model gets wrong comes back to it as a tool error it corrects, and a grant decides what it sees."""

from __future__ import annotations

from pathlib import Path

from firm.api import Firm
from firm.org import load_org
from firm.tasks import Status
from firm.testing import ModelServer, ScriptedModel, call, calls, complete, delegate
from tests.support import events_of

from .conftest import Runner

ORG = """\
company: Tools Co
tool_modules: [crm_tools.py]
agents:
  - {id: ceo, name: Cy, title: Chief Executive Officer, tools: ["crm.*"]}
  - {id: cto, name: Ty, title: Chief Technology Officer, reports_to: ceo, tools: ["crm.*"]}
  - {id: cmo, name: Mo, title: Chief Marketing Officer, reports_to: ceo}
  - {id: dev, name: Dee, title: Backend Engineer, reports_to: cto, tools: ["crm.*"]}
"""

CRM = '''\
from firm import tool


@tool("crm.query", limits={"rows": "max_rows"})
def query(segment: str, rows: int = 10) -> str:
    """Look customers up by segment."""
    return f"{rows} customers in {segment}"


@tool("crm.export")
def export(segment: str) -> str:
    """Export a segment (not granted to anyone below the CEO)."""
    return f"exported {segment}"
'''


def _company(tmp_path: Path):
    (tmp_path / "crm_tools.py").write_text(CRM)
    (tmp_path / "company.yaml").write_text(ORG)
    return load_org(tmp_path / "company.yaml")


def test_delegation_outside_the_chart_is_fed_back_and_corrected(
    tmp_path: Path, model: ScriptedModel, server: ModelServer, firm: Firm, run_crewai: Runner
) -> None:
    org = _company(tmp_path)
    # The cto tries to hand work to the cmo's side, reads why not, and delegates to dev.
    model.when(agent="cto", woken=False).reply(
        calls(delegate("cmo", "Write the ad copy")), calls(delegate("dev", "Build the API"))
    )
    model.when(agent="dev").reply(calls(complete("API built")))
    model.when(agent="cto", woken=True).reply(calls(complete("The API is built")))

    root = run_crewai(org, "Build the API", to="cto")

    assert root.status == Status.DONE, root.error
    second = server.requests_for("cto")[1].request
    assert "cmo does not report to you" in second.tool_results[0]
    assert [t.assignee for t in firm.subtree(root.id)] == ["cto", "dev"]
    refused = [e for e in events_of(firm, "tool_call", root.id) if not e.data["ok"]]
    assert refused and "does not report to you" in refused[0].data["error"]


def test_a_denied_tool_call_is_fed_back_and_corrected(
    tmp_path: Path, model: ScriptedModel, server: ModelServer, firm: Firm, run_crewai: Runner
) -> None:
    org = _company(tmp_path)
    model.when(agent="dev").reply(
        calls(call("crm_query", segment="smb", rows=500)),  # above its ceiling of 100
        calls(call("crm_query", segment="smb", rows=50)),
        calls(complete("50 customers found")),
    )

    root = run_crewai(org, "Find customers", to="dev", grant={"limits": {"max_rows": 100}})

    assert root.status == Status.DONE, root.error
    replies = [r.request.tool_results for r in server.requests_for("dev")[1:]]
    assert "max_rows" in replies[0][0] and replies[0][0].startswith("error")
    assert replies[1] == ["50 customers in smb"]
    denied = events_of(firm, "tool_denied", root.id)
    assert [d.data["tool"] for d in denied] == ["crm.query"]
    ran = [e.data["tool"] for e in events_of(firm, "tool_call", root.id)]
    assert ran.count("crm.query") == 1  # the denied call never ran


def test_the_agent_sees_only_the_tools_its_grant_offers(
    tmp_path: Path, model: ScriptedModel, server: ModelServer, firm: Firm, run_crewai: Runner
) -> None:
    org = _company(tmp_path)
    model.when(agent="dev").reply(
        calls(call("crm_export", segment="all")),  # not offered: refused, and it moves on
        calls(complete("done without exporting")),
    )

    root = run_crewai(org, "Export", to="dev", grant={"tools": ["crm.query"]})

    assert root.status == Status.DONE, root.error
    first = server.requests_for("dev")[0].request
    assert "crm_query" in first.tool_names and "crm_export" not in first.tool_names
    # CrewAI answers a call to a tool it was not given itself; firm never runs it.
    assert server.requests_for("dev")[1].request.tool_results == ["Tool not found"]
    assert not [e for e in events_of(firm, "tool_call", root.id) if e.data["tool"] == "crm.export"]
