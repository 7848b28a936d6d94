"""A delegate never holds more than its delegator: the cases from the issue, end to end.

Each company has a real tool module written beside its org chart; the module logs every tool
body it runs, so "denied before the body runs" is checked on what actually executed.
"""

from __future__ import annotations

from pathlib import Path

from firm.api import Firm
from firm.authority.grants import Grant
from firm.tasks import Status
from tests.authority.scripted import ScriptedBrain, delegate, open_firm, run_company, write_company
from tests.support import events_of


def grant_of(firm: Firm, assignee: str) -> Grant:
    (task,) = [t for t in firm.tasks() if t.assignee == assignee]
    return Grant.from_dict(task.grant)


REVIEW = """\
company: Review Co
tool_modules: [crm_tools.py]
agents:
  - {id: manager, name: Mia, title: Manager, tools: ["crm.query", "files.*"]}
  - id: reviewer
    name: Rex
    title: Reviewer
    reports_to: manager
    tools: ["crm.query", "crm.export"]
"""


def test_the_reviewer_cannot_export_what_its_manager_never_had(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", REVIEW)
    brain = ScriptedBrain(
        {
            "manager": [delegate("reviewer", "Review the Q3 summary")],
            "reviewer": [
                ("crm.query", {"segment": "enterprise", "rows": 5}),
                ("crm.export", {"destination": "s3://leak"}),
            ],
        }
    )
    with open_firm(tmp_path, brain) as firm:
        root = run_company(firm, company)
        assert root.status == Status.DONE
        # The query ran; the export was stopped before its body.
        assert company.ran() == ["crm.query"]
        (query,) = brain.results("reviewer", "crm.query")
        (export,) = brain.results("reviewer", "crm.export")
        assert query.ok and query.content == "5 customers in enterprise"
        assert not export.ok and export.denied is not None
        assert export.denied.code == "scope_not_granted"
        assert "crm.export" in export.content
        # The reviewer's grant is what its manager holds met with what it declares.
        assert grant_of(firm, "reviewer").scopes == ("crm.query",)
        (delegated,) = events_of(firm, "delegated")
        assert delegated.data["grant"]["scopes"] == ["crm.query"]
        # The denial is in the log, with its reason code and an argument digest.
        (denied,) = events_of(firm, "tool_denied")
        assert (denied.agent, denied.data["tool"], denied.data["code"]) == (
            "reviewer",
            "crm.export",
            "scope_not_granted",
        )
        assert len(denied.data["args_digest"]) == 64
        allowed = [e.data["tool"] for e in events_of(firm, "tool_call") if e.agent == "reviewer"]
        assert "crm.query" in allowed and "crm.export" not in allowed


def test_a_tool_less_manager_cannot_pass_an_export_down(tmp_path: Path) -> None:
    company = write_company(
        tmp_path / "co",
        """\
        company: Bare Co
        tool_modules: [crm_tools.py]
        agents:
          - {id: boss, name: Bo, title: Manager, tools: []}
          - {id: worker, name: Wu, title: Analyst, reports_to: boss, tools: ["crm.export"]}
        """,
    )
    brain = ScriptedBrain(
        {
            "boss": [("files.list", {}), delegate("worker", "Export the list")],
            "worker": [("crm.export", {"destination": "out"})],
        }
    )
    with open_firm(tmp_path, brain) as firm:
        run_company(firm, company)
        assert company.ran() == []
        assert brain.results("boss", "files.list")[0].denied.code == "scope_not_granted"
        assert brain.results("worker", "crm.export")[0].denied.code == "scope_not_granted"
        assert grant_of(firm, "worker").scopes == ()


def test_a_delegate_that_declares_nothing_gets_the_default_tools_only(tmp_path: Path) -> None:
    company = write_company(
        tmp_path / "co",
        """\
        company: Default Co
        tool_modules: [crm_tools.py]
        agents:
          - {id: boss, name: Bo, title: Manager, tools: ["crm.*", "files.*"]}
          - {id: plain, name: Pat, title: Writer, reports_to: boss}
          - {id: none, name: Ned, title: Clerk, reports_to: boss, tools: []}
        """,
    )
    steps = [("crm.query", {"segment": "smb", "rows": 1}), ("files.write", {"path": "x.md"})]
    brain = ScriptedBrain(
        {
            "boss": [delegate("plain", "Write it"), delegate("none", "File it")],
            "plain": [steps[0], ("files.write", {"path": "plain.md", "content": "hi"})],
            "none": [steps[0], ("files.write", {"path": "none.md", "content": "hi"})],
        }
    )
    with open_firm(tmp_path, brain) as firm:
        run_company(firm, company)
        assert company.ran() == []
        # No `tools:` means the company's default_tools (files.*): writing works, crm does not.
        assert grant_of(firm, "plain").scopes == ("files.*",)
        assert brain.results("plain", "crm.query")[0].denied.code == "scope_not_granted"
        assert brain.results("plain", "files.write")[0].ok
        # `tools: []` means nothing at all.
        assert grant_of(firm, "none").scopes == ()
        assert brain.results("none", "files.write")[0].denied.code == "scope_not_granted"
        assert (company.folder / "ws" / "plain.md").exists()
        assert not (company.folder / "ws" / "none.md").exists()


NARROW = """\
company: Narrow Co
tool_modules: [crm_tools.py]
agents:
  - id: lead
    name: Li
    title: Manager
    tools: ["crm.query", "files.*"]
    limits: {max_rows: 100}
    ttl: 3600
  - {id: analyst, name: Al, title: Analyst, reports_to: lead, tools: ["crm.*", "files.*"]}
"""


def test_a_greedy_narrowing_comes_back_no_wider_than_the_delegator(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", NARROW)
    greedy = delegate(
        "analyst", "Everything", tools=["*"], limits={"max_rows": 1e12}, ttl=10 * 365 * 86400
    )
    brain = ScriptedBrain(
        {
            "lead": [greedy],
            "analyst": [
                ("crm.query", {"segment": "all", "rows": 100}),
                ("crm.query", {"segment": "all", "rows": 101}),
                ("crm.export", {"destination": "x"}),
            ],
        }
    )
    with open_firm(tmp_path, brain) as firm:
        run_company(firm, company)
        lead, analyst = grant_of(firm, "lead"), grant_of(firm, "analyst")
        assert analyst.scopes == ("crm.query", "files.*")
        assert analyst.limits == {"max_rows": 100}
        assert analyst.expires_at is not None and analyst.expires_at <= lead.expires_at
        ok, over = brain.results("analyst", "crm.query")
        assert ok.ok and over.denied.code == "ceiling_exceeded"
        assert "max_rows" in over.content
        assert brain.results("analyst", "crm.export")[0].denied.code == "scope_not_granted"
        assert company.ran() == ["crm.query"]


def test_a_narrowing_narrows_and_a_limited_argument_left_out_is_denied(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", NARROW)
    brain = ScriptedBrain(
        {
            "lead": [delegate("analyst", "A little", tools=["crm.query"], limits={"max_rows": 10})],
            "analyst": [
                ("crm.query", {"segment": "a", "rows": 10}),
                ("crm.query", {"segment": "b", "rows": 11}),
                ("crm.query", {"segment": "c"}),  # rows has a default, but it is limited
                ("files.write", {"path": "n.md", "content": "x"}),
            ],
        }
    )
    with open_firm(tmp_path, brain) as firm:
        run_company(firm, company)
        assert grant_of(firm, "analyst").scopes == ("crm.query",)
        a, b, c = brain.results("analyst", "crm.query")
        assert a.ok
        assert b.denied.code == "ceiling_exceeded"
        assert c.denied.code == "ceiling_exceeded" and "explicitly" in c.content
        assert brain.results("analyst", "files.write")[0].denied.code == "scope_not_granted"
        assert company.ran() == ["crm.query"]


def test_a_bad_narrowing_is_a_tool_error_the_model_can_fix(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", NARROW)
    brain = ScriptedBrain(
        {"lead": [delegate("analyst", "Odd", tools=["crm query!"]), delegate("analyst", "Ok")]}
    )
    with open_firm(tmp_path, brain) as firm:
        run_company(firm, company)
        bad, good = brain.results("lead", "delegate_task")
        assert not bad.ok and "'crm query!' is not a tool name or glob" in bad.content
        assert good.ok
        assert [t.title for t in firm.tasks() if t.assignee == "analyst"] == ["Ok"]


def test_can_grant_empowers_a_report_with_a_tool_its_manager_cannot_call(tmp_path: Path) -> None:
    company = write_company(
        tmp_path / "co",
        """\
        company: Grant Co
        tool_modules: [crm_tools.py]
        agents:
          - id: head
            name: Hu
            title: Head of Data
            tools: ["files.*"]
            can_grant: ["crm.export"]
          - {id: ops, name: Oz, title: Operations, reports_to: head, tools: ["crm.export"]}
        """,
    )
    brain = ScriptedBrain(
        {
            "head": [("crm.export", {"destination": "mine"}), delegate("ops", "Ship it")],
            "ops": [("crm.export", {"destination": "warehouse"})],
        }
    )
    with open_firm(tmp_path, brain) as firm:
        run_company(firm, company)
        own = brain.results("head", "crm.export")[0]
        assert own.denied.code == "scope_not_granted" and "not call it" in own.content
        assert brain.results("ops", "crm.export")[0].ok
        assert company.ran() == ["crm.export"]
        assert grant_of(firm, "head").scopes == ("crm.export", "files.*")
        assert grant_of(firm, "ops").scopes == ("crm.export",)


def test_the_submitter_narrows_the_root_grant(tmp_path: Path) -> None:
    company = write_company(
        tmp_path / "co",
        """\
        company: Root Co
        tool_modules: [crm_tools.py]
        agents:
          - {id: solo, name: So, title: Analyst, tools: ["crm.*"]}
        """,
    )
    brain = ScriptedBrain(
        {
            "solo": [
                ("crm.query", {"segment": "a", "rows": 3}),
                ("crm.query", {"segment": "a", "rows": 4}),
                ("crm.export", {"destination": "x"}),
            ]
        }
    )
    with open_firm(tmp_path, brain) as firm:
        run_company(
            firm, company, grant={"tools": ["crm.query"], "limits": {"max_rows": 3}, "ttl": 600}
        )
        root = grant_of(firm, "solo")
        assert root.scopes == ("crm.query",) and root.limits == {"max_rows": 3}
        assert [r.ok for r in brain.results("solo", "crm.query")] == [True, False]
        assert brain.results("solo", "crm.export")[0].denied.code == "scope_not_granted"
        (created,) = events_of(firm, "created")
        assert created.data["grant"] == root.to_dict()


def test_only_granted_tools_are_offered(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", REVIEW)
    offered: dict[str, list[str]] = {}

    def look(session) -> None:
        offered[session.agent_id] = sorted(t.name for t in session.tools())
        if session.reports:
            session.call("delegate_task", {"assignee": "reviewer", "title": "t", "description": ""})

    brain = ScriptedBrain({"manager": look, "reviewer": look})
    with open_firm(tmp_path, brain) as firm:
        run_company(firm, company)
    assert offered["manager"] == [
        "complete_task",
        "crm.query",
        "delegate_task",
        "fail_task",
        "files.list",
        "files.read",
        "files.write",
    ]
    assert offered["reviewer"] == ["complete_task", "crm.query", "fail_task"]


def test_two_tasks_of_one_agent_are_offered_what_each_ones_grant_allows(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", NARROW)
    offered: dict[str, list[str]] = {}

    def look(session) -> None:
        offered[session.task.title] = sorted(t.name for t in session.tools())

    brain = ScriptedBrain(
        {
            "lead": [
                delegate("analyst", "Wide"),
                delegate("analyst", "Narrow", tools=["crm.query"]),
                delegate("analyst", "Wide again"),
            ],
            "analyst": look,
        }
    )
    with open_firm(tmp_path, brain) as firm:
        run_company(firm, company)
    everything = ["complete_task", "crm.query", "fail_task", "files.list", "files.read"]
    assert offered["Wide"] == offered["Wide again"] == [*everything, "files.write"]
    assert offered["Narrow"] == ["complete_task", "crm.query", "fail_task"]
