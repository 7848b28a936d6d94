"""A company that mixes brains: `brain: crewai` on a manager in the chart, llm reports below."""

from __future__ import annotations

from pathlib import Path

import pytest

from firm.api import Firm
from firm.errors import FirmError
from firm.org import load_org
from firm.tasks import Status
from firm.testing import ModelServer, ScriptedModel, calls, complete, delegate

from .conftest import Runner

ORG = """\
company: Mixed Co
{company_brain}agents:
  - {{id: ceo, name: Cy, title: Chief Executive Officer}}
  - {{id: cto, name: Ty, title: Chief Technology Officer, reports_to: ceo, brain: crewai}}
  - {{id: dev, name: Dee, title: Backend Engineer, reports_to: cto}}
  - {{id: qa, name: Quinn, title: QA Engineer, reports_to: cto}}
"""


def _crewai_made(request: object) -> bool:
    return "Current Task:" in request.brief  # type: ignore[attr-defined]


def test_a_crewai_manager_above_llm_reports(
    tmp_path: Path, model: ScriptedModel, server: ModelServer, firm: Firm, run_crewai: Runner
) -> None:
    (tmp_path / "company.yaml").write_text(ORG.format(company_brain=""))
    org = load_org(tmp_path / "company.yaml")
    model.when(agent="ceo", woken=False).reply(calls(delegate("cto", "Build it")))
    model.when(agent="cto", woken=False).reply(
        calls(delegate("dev", "The API"), delegate("qa", "The tests"))
    )
    model.when(agent="dev").reply(calls(complete("API done")))
    model.when(agent="qa").reply(calls(complete("Tests pass")))
    model.when(agent="cto", woken=True).reply(calls(complete("Built and tested")))
    model.when(agent="ceo", woken=True).reply(calls(complete("Shipped")))

    root = run_crewai(org, "Ship the product", brain="llm")

    assert root.status == Status.DONE, root.error
    assert root.result == "Shipped"
    agents = ("ceo", "cto", "dev", "qa")
    by_agent = {a: [_crewai_made(r.request) for r in server.requests_for(a)] for a in agents}
    assert by_agent == {
        "ceo": [False, False],  # the run's brain: llm
        "cto": [True, True],  # its own: a CrewAI crew each session
        "dev": [False],
        "qa": [False],
    }
    assert all(t.status == Status.DONE for t in firm.subtree(root.id))


def test_the_chart_names_the_brain_for_the_whole_company(
    tmp_path: Path, model: ScriptedModel, server: ModelServer, run_crewai: Runner
) -> None:
    (tmp_path / "company.yaml").write_text(ORG.format(company_brain="brain: crewai\n"))
    org = load_org(tmp_path / "company.yaml")
    model.when(agent="dev").reply(calls(complete("API done")))
    root = run_crewai(org, "Build the API", to="dev", brain="llm")
    assert root.status == Status.DONE, root.error
    assert _crewai_made(server.requests_for("dev")[0].request)


def test_an_unknown_brain_in_the_chart_is_refused_at_submit(tmp_path: Path, firm: Firm) -> None:
    (tmp_path / "company.yaml").write_text(ORG.format(company_brain="brain: telepathy\n"))
    with pytest.raises(FirmError, match="unknown brain 'telepathy'"):
        firm.submit(load_org(tmp_path / "company.yaml"), "x", brain="simulation")
