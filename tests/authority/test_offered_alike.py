"""The tools a session is offered are worked out once for agents alike in what decides them
(their own tools, whether they have reports, whether they may ask a person, their grant's
scopes) and shared: each agent is still offered exactly its own."""

from __future__ import annotations

from pathlib import Path

from firm.session import Session
from tests.authority.scripted import ScriptedBrain, open_firm, run_company, write_company

ALIKE = """\
company: Alike Co
tool_modules: [crm_tools.py]
agents:
  - {id: boss, name: Bo, title: Manager, tools: ["crm.*", "files.*"]}
  - {id: a1, name: Al, title: Analyst, reports_to: boss, tools: ["crm.query"]}
  - {id: a2, name: Ann, title: Analyst, reports_to: boss, tools: ["crm.query"]}
  - {id: w1, name: Wes, title: Writer, reports_to: boss, tools: ["files.*"]}
  - {id: h1, name: Hal, title: Analyst, reports_to: boss, tools: ["crm.query"], ask_human: true}
  - {id: m1, name: Mo, title: Lead, reports_to: boss, tools: ["crm.query"]}
  - {id: r1, name: Ray, title: Analyst, reports_to: m1, tools: ["crm.query"]}
"""


def test_agents_alike_are_offered_the_same_and_others_their_own(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", ALIKE)
    offered: dict[str, list[str]] = {}

    def look(session: Session) -> None:
        offered[session.agent_id] = sorted(t.name for t in session.tools())
        for report in session.reports:
            session.call("delegate_task", {"assignee": report.id, "title": "t", "description": ""})

    brain = ScriptedBrain({a: look for a in ("boss", "a1", "a2", "w1", "h1", "m1", "r1")})
    with open_firm(tmp_path, brain) as firm:
        run_company(firm, company)
    analyst = ["complete_task", "crm.query", "fail_task"]
    assert offered["a1"] == offered["a2"] == offered["r1"] == analyst
    assert offered["w1"] == [
        "complete_task",
        "fail_task",
        "files.list",
        "files.read",
        "files.write",
    ]
    assert offered["h1"] == ["ask_human", *analyst]
    assert offered["m1"] == ["complete_task", "crm.query", "delegate_task", "fail_task"]
