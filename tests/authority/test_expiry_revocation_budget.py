"""Authority that ends: expiry, revocation (by hand, cascading, and by policy), budgets."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from firm.api import Firm
from firm.authority.check import Link, Standing, check_call
from firm.authority.grants import Grant
from firm.org import parse_org
from firm.session import Session
from firm.tasks import Status
from firm.testing import ManualClock
from firm.tools.builtin import FILE_TOOLS
from tests.authority.scripted import ScriptedBrain, delegate, open_firm, run_company, write_company
from tests.support import firm_cli

TEAM = """\
company: Team Co
tool_modules: [crm_tools.py]
agents:
  - {id: ceo, name: Ava, title: Chief Executive Officer, tools: ["crm.*", "files.*"]}
  - {id: cto, name: Ben, title: CTO, reports_to: ceo, tools: ["crm.*", "files.*"]}
  - {id: cmo, name: Cleo, title: Chief Marketing Officer, reports_to: ceo, tools: ["files.*"]}
  - {id: dev, name: Dee, title: Engineer, reports_to: cto, tools: ["crm.*", "files.*"]}
"""


def task_of(firm: Firm, assignee: str):
    (task,) = [t for t in firm.tasks() if t.assignee == assignee]
    return task


def test_calls_after_the_grant_expires_are_denied(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", TEAM)

    def late(session: Session) -> None:
        brain.call(session, "crm.query", {"segment": "a", "rows": 1})
        clock.advance(0.4)  # outlive the 0.2 s the delegation allowed
        brain.call(session, "crm.query", {"segment": "b", "rows": 1})
        brain.call(session, "complete_task", {"result": "late"})
        brain.call(session, "fail_task", {"reason": "ran out of time"})

    clock = ManualClock()
    brain = ScriptedBrain({"ceo": [delegate("cto", "Quick", ttl=0.2)], "cto": late})
    with open_firm(tmp_path, brain, clock) as firm:
        run_company(firm, company)
        first, second = brain.results("cto", "crm.query")
        assert first.ok and second.denied.code == "expired"
        assert brain.results("cto", "complete_task")[0].denied.code == "expired"
        assert brain.results("cto", "fail_task")[0].ok  # giving up stays possible
        assert company.ran() == ["crm.query"]
        assert task_of(firm, "cto").status == Status.FAILED


def test_an_expired_session_cannot_end_done_with_its_last_message(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", TEAM)

    def late(session: Session) -> str:
        clock.advance(0.4)  # outlive the 0.2 s the delegation allowed
        denied = brain.call(session, "complete_task", {"result": "late"})
        assert denied.denied is not None and denied.denied.code == "expired"
        return "late anyway"  # ending with a message is completing: it is refused too

    clock = ManualClock()
    brain = ScriptedBrain({"ceo": [delegate("cto", "Quick", ttl=0.2)], "cto": late})
    with open_firm(tmp_path, brain, clock) as firm:
        run_company(firm, company)
        cto = task_of(firm, "cto")
        assert cto.status == Status.FAILED and (cto.error or "").startswith("expired:")


def standing(lineage: tuple[Link, ...], grant: Grant, now: float) -> Standing:
    return Standing("T-child", "dev", grant, lineage, None, checked_seq=1, checked_at=now)


def test_an_ancestors_expiry_or_revocation_binds_its_descendants() -> None:
    org = parse_org(TEAM)
    write = FILE_TOOLS[1]
    grant = Grant.of(["files.*"])
    args = {"path": "a.md", "content": "x"}
    fine = (Link("T-child", None, False), Link("T-parent", 2000.0, False))
    assert check_call(org, standing(fine, grant, 1000.0), write, args) is None
    lapsed = (Link("T-child", None, False), Link("T-parent", 500.0, False))
    denial = check_call(org, standing(lapsed, grant, 1000.0), write, args)
    assert denial is not None and denial.code == "expired" and "T-parent" in denial.reason
    revoked = (Link("T-child", None, False), Link("T-parent", None, True))
    denial = check_call(org, standing(revoked, grant, 1000.0), write, args)
    assert denial is not None and denial.code == "revoked" and "T-parent" in denial.reason


def test_revoking_a_manager_cascades_and_its_running_reports_are_denied(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", TEAM)
    inside, go = threading.Event(), threading.Event()

    def dev(session: Session) -> None:
        inside.set()
        assert go.wait(30)
        brain.call(session, "files.write", {"path": "dev.md", "content": "after revoke"})
        brain.call(session, "complete_task", {"result": "sneaky"})
        session.check_cancelled()  # the brain's next step: the session stops here

    brain = ScriptedBrain(
        {
            "ceo": [delegate("cto", "Build"), delegate("cmo", "Market")],
            "cto": [delegate("dev", "Code")],
            "dev": dev,
        }
    )
    with open_firm(tmp_path, brain) as firm:
        root = firm.submit(company.org_path, "Launch", workspace=company.folder / "ws")
        firm.engine.start()
        assert inside.wait(30)
        cto = task_of(firm, "cto")
        revoked = firm.revoke(cto.id, "changed plans")
        go.set()
        done = firm.run_until(root.id, timeout=60)
        firm.run_until_idle(timeout=60)

        assert {task_of(firm, w).id for w in ("cto", "dev")} == set(revoked)
        for who in ("cto", "dev"):
            t = task_of(firm, who)
            assert t.revoked and t.status == Status.CANCELLED
            assert t.error == "revoked: changed plans"
        assert not task_of(firm, "cmo").revoked and task_of(firm, "cmo").status == Status.DONE
        # The running report's calls after the revocation were denied, and logged as such.
        assert brain.results("dev", "files.write")[0].denied.code == "revoked"
        assert brain.results("dev", "complete_task")[0].denied.code == "revoked"
        assert not (company.folder / "ws" / "dev.md").exists()
        denied = [e for e in firm.events(limit=10_000) if e.kind == "tool_denied"]
        assert {(e.agent, e.data["code"]) for e in denied} == {("dev", "revoked")}
        kinds = [(e.kind, e.task_id) for e in firm.events(limit=10_000)]
        assert ("revoked", cto.id) in kinds and ("cancelled", cto.id) in kinds
        # The manager above is woken and sees why.
        assert done.status == Status.DONE and "cto: cancelled" in done.result


def test_revoking_twice_revokes_nothing_more(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", TEAM)
    with open_firm(tmp_path, ScriptedBrain({})) as firm:
        root = firm.submit(company.org_path, "Launch", workspace=company.folder / "ws")
        assert firm.revoke(root.id) == [root.id]
        assert firm.revoke(root.id) == []
        assert firm.task(root.id).status == Status.CANCELLED


def test_firm_revoke_command(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", TEAM)
    db = str(tmp_path / "state" / "firm.db")
    with Firm(db) as firm:
        root = firm.submit(company.org_path, "Launch", workspace=company.folder / "ws")
    out = firm_cli("revoke", root.id, "--reason", "budget cut", "--db", db, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"Revoked 1 task(s): {root.id}" in out.stdout
    again = firm_cli("revoke", root.id, "--db", db, cwd=tmp_path)
    assert again.returncode == 0 and "already revoked" in again.stdout
    missing = firm_cli("revoke", "T-00000000", "--db", db, cwd=tmp_path)
    assert missing.returncode == 2 and "no task with id 'T-00000000'" in missing.stderr
    with Firm(db) as firm:
        t = firm.task(root.id)
        assert t.revoked and t.error == "revoked: budget cut"


POLICY = """\
company: Strict Co
tool_modules: [crm_tools.py]
on_denial: {policy}
agents:
  - {{id: boss, name: Bo, title: Manager, tools: ["crm.query", "files.*"]}}
  - {{id: temp, name: Tim, title: Analyst, reports_to: boss, tools: ["crm.*", "files.*"]}}
"""


@pytest.mark.parametrize("policy", ["revoke", "deny"])
def test_on_denial_revoke_revokes_the_node_that_was_denied(tmp_path: Path, policy: str) -> None:
    company = write_company(tmp_path / "co", POLICY.format(policy=policy))
    brain = ScriptedBrain(
        {
            "boss": [delegate("temp", "Pull numbers")],
            "temp": [
                ("crm.export", {"destination": "x"}),
                ("files.write", {"path": "t.md", "content": "x"}),
            ],
        }
    )
    with open_firm(tmp_path, brain) as firm:
        root = run_company(firm, company)
        temp = task_of(firm, "temp")
        assert brain.results("temp", "crm.export")[0].denied.code == "scope_not_granted"
        write = brain.results("temp", "files.write")[0]
        revoked = [e for e in firm.events(limit=10_000) if e.kind == "revoked"]
        if policy == "revoke":
            assert temp.revoked and temp.status == Status.CANCELLED
            assert write.denied.code == "revoked"
            assert [(e.task_id, e.data["by"]) for e in revoked] == [(temp.id, "policy")]
            assert not firm.task(root.id).revoked and root.status == Status.DONE
        else:
            assert not temp.revoked and temp.status == Status.DONE
            assert write.ok and revoked == []


BUDGET = """\
company: Lean Co
agents:
  - {id: ceo, name: Ava, title: Chief Executive Officer, budget_tokens: 9000}
  - {id: cto, name: Ben, title: Chief Technology Officer, reports_to: ceo}
  - {id: cmo, name: Cleo, title: Chief Marketing Officer, reports_to: ceo}
  - {id: dev, name: Dee, title: Engineer, reports_to: cto}
  - {id: ops, name: Oz, title: Operations, reports_to: cto, budget_tokens: 5000}
"""


def test_budgets_are_carved_out_of_what_the_delegator_has_left(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", BUDGET)
    left: dict[str, list[int | None]] = {}

    def ceo(session: Session) -> None:
        left["ceo"] = [session.tokens_remaining()]
        session.record_usage(1, 2000, 500)  # a model call's worth
        left["ceo"].append(session.tokens_remaining())
        brain.call(session, *delegate("cto", "Build"))
        brain.call(session, *delegate("cmo", "Market"))
        left["ceo"].append(session.tokens_remaining())
        brain.call(session, "files.write", {"path": "ceo.md", "content": "x"})

    def cto(session: Session) -> None:
        brain.call(session, *delegate("dev", "Code"))
        brain.call(session, *delegate("ops", "Run"))
        left["cto"] = [session.tokens_remaining()]

    def dev(session: Session) -> None:
        session.record_usage(1, 900, 100)  # its whole share
        left["dev"] = [session.tokens_remaining()]
        brain.call(session, "files.write", {"path": "dev.md", "content": "x"})

    brain = ScriptedBrain({"ceo": ceo, "cto": cto, "dev": dev})
    with open_firm(tmp_path, brain) as firm:
        run_company(firm, company)
        budgets = {t.assignee: Grant.from_dict(t.grant).budget_tokens for t in firm.tasks()}
    # The root holds 9000. Each report without a budget of its own gets an equal share,
    # 9000 // (2 reports + 1), never more than the delegator still has (6500, then 3500).
    assert budgets["ceo"] == 9000 and budgets["cto"] == 3000 and budgets["cmo"] == 3000
    assert left["ceo"] == [9000, 6500, 500]
    # cto's 3000: dev gets 3000 // 3; ops asks for 5000 but only 2000 is left.
    assert budgets["dev"] == 1000 and budgets["ops"] == 2000
    assert left["cto"] == [0]
    assert budgets["cto"] + budgets["cmo"] <= budgets["ceo"]
    # Spent out: the next tool call is denied, before its body.
    assert left["dev"] == [0]
    assert brain.results("dev", "files.write")[0].denied.code == "budget_exhausted"
    assert brain.results("ceo", "files.write")[0].ok


def test_a_run_without_budgets_is_unlimited(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", TEAM)
    seen = []
    brain = ScriptedBrain({"ceo": lambda s: seen.append(s.tokens_remaining())})
    with open_firm(tmp_path, brain) as firm:
        run_company(firm, company)
    assert seen == [None]
