"""Approved delegations (`delegations: true`): a gated manager's subtasks of one turn wait as
one plan; approve starts them, deny (or timeout) cancels them and tells the manager why;
cancel withdraws; the audit verifier checks that they started only after an approval."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.errors import AlreadyDecided
from firm.events import EventKind
from firm.server import AccessPolicy, Office, OfficeServer
from firm.server.access import parse_people
from firm.tasks import Status
from firm.testing import (
    ModelRequest,
    ModelServer,
    ScriptedModel,
    calls,
    complete,
    delegate,
    hang,
)
from tests.approvals.conftest import write_company
from tests.audit.conftest import rehash
from tests.support.cli import firm_cli

PLAN_ORG = """\
company: Plan Co
tool_modules: [pay_tools.py]
approvals:
  - agents: [ceo]
    delegations: true
    timeout: {timeout}
agents:
  - {{id: ceo, name: Ada, title: CEO}}
  - {{id: cto, name: Tom, title: CTO, reports_to: ceo, tools: ["files.*"]}}
  - {{id: cfo, name: Cam, title: CFO, reports_to: ceo, tools: ["payments.balance"]}}
"""

Go = Callable[[], str]


def _events(firm: Firm, kind: str) -> list:
    return [e for e in firm.events(limit=100_000) if e.kind == kind]


def _script(model: ScriptedModel, seen: list[str]) -> None:
    """The CEO hands out two subtasks in one reply; once woken, it reports what it saw."""

    def woken(req: ModelRequest):  # type: ignore[no-untyped-def]
        seen.append(req.brief)
        if "was denied" in req.brief and len(seen) == 1:
            # It acts on the reason: a new, smaller plan.
            return calls(delegate("cto", "Ship the landing page only", "One page, no blog."))
        return calls(complete("done: " + str(len(seen))))

    model.when(agent="ceo", woken=False).reply(
        calls(
            delegate("cto", "Build the site", "A site with a blog.", tools=["files.write"]),
            delegate("cfo", "Check the budget", "Can we afford it?"),
        )
    )
    model.when(agent="ceo", woken=True).always(woken)
    model.when(agent="cto").always(calls(complete("built")))
    model.when(agent="cfo").always(calls(complete("affordable")))


@pytest.fixture
def go(tmp_path: Path, firm: Firm, server: ModelServer, request: pytest.FixtureRequest) -> Go:
    timeout = getattr(request, "param", "2h")
    co = write_company(tmp_path / "co", timeout=timeout, org=PLAN_ORG)

    def submit() -> str:
        return firm.submit(
            co.org_path,
            "Launch the product",
            brain="llm",
            brain_options=server.brain_options(backoff=0.01, backoff_max=0.02, timeout=5.0),
            workspace=co.folder / "ws",
        ).id

    return submit


def _held_plan(firm: Firm, root: str, server: ModelServer):  # type: ignore[no-untyped-def]
    assert firm.run_until(root, timeout=30).status == Status.WAITING
    (plan,) = firm.store.approvals(status="pending")
    subtasks = [t for t in firm.subtree(root) if t.id != root]
    assert [t.status for t in subtasks] == [Status.TODO, Status.TODO]
    # Not started: no session of theirs ran, no model call was made for them.
    assert not server.requests_for("cto") and not server.requests_for("cfo")
    assert not [e for e in _events(firm, EventKind.STARTED) if e.task_id != root]
    assert firm.engine.running == []  # the manager holds no worker while it waits
    return plan, subtasks


def test_approve_starts_the_subtasks_and_not_before(
    firm: Firm, model: ScriptedModel, server: ModelServer, go: Go
) -> None:
    seen: list[str] = []
    _script(model, seen)
    root = go()
    plan, subtasks = _held_plan(firm, root, server)
    assert plan.id.startswith("P-") and plan.tool == "delegate_task" and plan.agent == "ceo"
    assert plan.to_dict()["kind"] == "plan"
    shown = plan.args["delegations"]
    assert [(d["to"], d["title"], d["brief"]) for d in shown] == [
        ("cto", "Build the site", "A site with a blog."),
        ("cfo", "Check the budget", "Can we afford it?"),
    ]
    assert shown[0]["tools"] == ["files.write"]  # the narrowed grant, as it would start
    assert {d["task_id"] for d in shown} == {t.id for t in subtasks}
    assert firm.store.counts(root).get("held") == 2
    # Nothing moves while the plan waits, however long the engine runs.
    time.sleep(0.5)
    assert not server.requests_for("cto") and not server.requests_for("cfo")

    firm.store.decide_approval(plan.id, "approved", "alice", "go ahead")
    with pytest.raises(AlreadyDecided, match="first decision stands"):
        firm.store.decide_approval(plan.id, "denied", "bob", "no")
    done = firm.run_until(root, timeout=30)
    assert done.status == Status.DONE, done.error
    assert all(t.status == Status.DONE for t in firm.subtree(root))
    assert server.requests_for("cto") and server.requests_for("cfo")
    (decided,) = _events(firm, EventKind.APPROVAL_DECIDED)
    starts = [e for e in _events(firm, EventKind.STARTED) if e.task_id != root]
    assert len(starts) == 2 and all(e.seq > decided.seq for e in starts)
    assert "your plan (2 delegations" in seen[0] and "approved by alice" in seen[0]

    report = verify_bundle(firm.export_audit(root), firm.audit_key().public)
    assert report.verified, [c.line() for c in report.checks]
    assert "2 subtask(s) of gated managers started after" in report.check("approvals").detail


def test_deny_cancels_the_subtasks_and_the_reason_reaches_the_model(
    firm: Firm, model: ScriptedModel, server: ModelServer, go: Go
) -> None:
    seen: list[str] = []
    _script(model, seen)
    root = go()
    plan, subtasks = _held_plan(firm, root, server)
    firm.store.decide_approval(plan.id, "denied", "bob", "too big: the landing page first")
    for t in subtasks:
        after = firm.task(t.id)
        assert after.status == Status.CANCELLED and "too big" in (after.error or "")
    # The manager wakes, is told why, and delegates again: a new plan, waiting in its turn.
    assert firm.run_until(root, timeout=30).status == Status.WAITING
    assert "denied by bob — too big: the landing page first" in seen[0]
    assert "error:" in seen[0]
    (again,) = firm.store.approvals(status="pending")
    assert again.id != plan.id
    assert [d["title"] for d in again.args["delegations"]] == ["Ship the landing page only"]
    assert not server.requests_for("cto") and not server.requests_for("cfo")
    firm.store.decide_approval(again.id, "approved", "bob")
    assert firm.run_until(root, timeout=30).status == Status.DONE
    assert len(server.requests_for("cto")) == 1 and not server.requests_for("cfo")
    report = verify_bundle(firm.export_audit(root), firm.audit_key().public)
    assert report.verified, [c.line() for c in report.checks]


def _decided_plan(firm: Firm, root: str, timeout: float = 60):  # type: ignore[no-untyped-def]
    """The run's first plan once it is decided (the deadline only bounds a hang)."""
    deadline = time.monotonic() + timeout
    while True:
        plans = sorted(firm.store.approvals(root_id=root), key=lambda a: a.requested_at)
        if plans and plans[0].status != "pending":
            return plans[0]
        assert time.monotonic() < deadline, f"the plan was never decided: {plans}"
        time.sleep(0.05)


@pytest.mark.parametrize("go", ["1s"], indirect=True)
def test_a_plan_nobody_decides_times_out(
    firm: Firm, model: ScriptedModel, server: ModelServer, go: Go
) -> None:
    seen: list[str] = []
    _script(model, seen)
    root = go()
    firm.engine.start()
    # Waited for by the plan's decision, not by the manager's wait: on a loaded machine the
    # one second can be over, the manager woken and the run done, before the test looks.
    # That a plan holds its subtasks while pending is what the 2h tests assert (_held_plan).
    plan = _decided_plan(firm, root)
    assert plan.status == "timed_out" and plan.decided_by == "timeout"
    subtasks = [firm.task(d["task_id"]) for d in plan.args["delegations"]]
    assert len(subtasks) == 2
    with pytest.raises(AlreadyDecided):
        firm.store.decide_approval(plan.id, "approved", "alice")
    assert all(firm.task(t.id).status == Status.CANCELLED for t in subtasks)
    firm.run_until(root, timeout=60)  # the woken manager has had its turn
    assert "no one decided before its timeout" in seen[0]
    assert not server.requests_for("cfo") and not server.requests_for("cto")


def test_cancelling_the_manager_withdraws_its_plan(
    firm: Firm, model: ScriptedModel, server: ModelServer, go: Go
) -> None:
    _script(model, [])
    root = go()
    plan, subtasks = _held_plan(firm, root, server)
    firm.cancel(root, "changed our mind")
    assert firm.store.get_approval(plan.id).status == "withdrawn"
    assert all(firm.task(t.id).status == Status.CANCELLED for t in subtasks)
    with pytest.raises(AlreadyDecided):
        firm.store.decide_approval(plan.id, "approved", "alice")
    assert not server.requests_for("cto") and not server.requests_for("cfo")


def test_a_decision_made_with_no_engine_running_takes_effect_when_one_starts(
    firm: Firm, model: ScriptedModel, server: ModelServer, go: Go, db: str
) -> None:
    _script(model, [])
    root = go()
    plan, _ = _held_plan(firm, root, server)
    firm.close()
    with Firm(db, heartbeat=0.1) as other:  # another process's store handle, no engine
        other.store.decide_approval(plan.id, "approved", "carol")
    with Firm(db, heartbeat=0.1) as again:
        assert again.run_until(root, timeout=30).status == Status.DONE
    assert server.requests_for("cto") and server.requests_for("cfo")


def test_the_verifier_catches_a_subtask_that_started_without_its_plan(
    firm: Firm, model: ScriptedModel, server: ModelServer, go: Go
) -> None:
    _script(model, [])
    root = go()
    plan, _ = _held_plan(firm, root, server)
    firm.store.decide_approval(plan.id, "approved", "alice")
    assert firm.run_until(root, timeout=30).status == Status.DONE
    key = firm.audit_key()
    bundle = firm.export_audit(root)
    # An insider rewrites the approval into a denial and re-signs: the subtasks started anyway.
    for e in bundle["entries"]:
        if e["kind"] == "approval_decided":
            e["data"]["decision"] = "denied"
    report = verify_bundle(rehash(bundle, key), key.public)
    assert report.check("integrity").verdict == "PASS"
    check = report.check("approvals")
    assert check.verdict == "FAIL" and f"plan {plan.id} was denied, not approved" in check.detail
    # Or deletes the plan from the delegations (as an engine that skipped the gate would log).
    bundle = firm.export_audit(root)
    for e in bundle["entries"]:
        if e["kind"] == "delegated":
            e["data"].pop("plan")
    check = verify_bundle(rehash(bundle, key), key.public).check("approvals")
    assert check.verdict == "FAIL" and "outside a plan" in check.detail


WORKER = """
import sys, time
from firm.api import Firm
firm = Firm(sys.argv[1], heartbeat=0.1)
firm.engine.start()
time.sleep(120)
"""


def test_a_worker_killed_after_the_approval_loses_nothing(
    tmp_path: Path, model: ScriptedModel, server: ModelServer, db: str
) -> None:
    co = write_company(tmp_path / "co", org=PLAN_ORG)
    seen: list[str] = []
    _script(model, seen)
    # The CTO's first session hangs at its first model call: the worker dies there. (The
    # one-off hang goes ahead of the `always` rules.)
    model.when(agent="cto").reply(hang(3))
    model.rules.insert(0, model.rules.pop())
    with Firm(db, heartbeat=0.1) as firm:
        root = firm.submit(
            co.org_path,
            "Launch the product",
            brain="llm",
            brain_options=server.brain_options(timeout=5.0),
            workspace=co.folder / "ws",
        ).id
        plan, _ = _held_plan(firm, root, server)
    with Firm(db) as person:  # no engine runs while the person decides
        person.store.decide_approval(plan.id, "approved", "alice")

    worker = subprocess.Popen([sys.executable, "-c", WORKER, db], cwd=tmp_path)
    try:
        # The guards only catch a hang: a fresh Python importing firm has taken over 60 s to
        # make its first call on a machine at load 20, and a passing run never waits them out.
        assert server.wait_for_requests(2, timeout=180)  # the CTO's or CFO's session began
        deadline = time.monotonic() + 180
        while not server.requests_for("cto") and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
    finally:
        if worker.poll() is None:
            worker.kill()

    with Firm(db, heartbeat=0.1) as firm:
        done = firm.run_until(root, timeout=60)
        assert done.status == Status.DONE, done.error
        assert all(t.status == Status.DONE for t in firm.subtree(root))
        assert firm.store.get_approval(plan.id).status == "approved"
        report = verify_bundle(firm.export_audit(root), firm.audit_key().public)
        assert report.verified, [c.line() for c in report.checks]


def test_plans_through_the_api_and_the_cli(
    tmp_path: Path, model: ScriptedModel, server: ModelServer
) -> None:
    seen: list[str] = []
    _script(model, seen)
    co = write_company(tmp_path / "co", org=PLAN_ORG)
    office = Office(
        co.org_path,
        db=tmp_path / "firm.db",
        brain="llm",
        brain_options=server.brain_options(timeout=5.0),
        workspace=tmp_path / "ws",
        policy=AccessPolicy(
            token="office-secret", reads_need_token=False, people=parse_people("alice:tok-a")
        ),
        heartbeat=0.1,
    )
    running = OfficeServer(office, "127.0.0.1", 0).start()
    try:
        with httpx.Client(base_url=running.url, timeout=30) as c:
            alice = {"Authorization": "Bearer tok-a"}
            root = c.post("/api/tasks", json={"goal": "Launch"}, headers=alice).json()["id"]
            assert office.firm.run_until(root, timeout=30).status == Status.WAITING
            (plan,) = c.get("/api/approvals").json()
            assert plan["kind"] == "plan" and plan["tool"] == "delegate_task"
            assert [d["to"] for d in plan["args"]["delegations"]] == ["cto", "cfo"]
            # The CLI shows the same plan, each delegation with its brief and tools.
            human = firm_cli("approvals", "--db", str(tmp_path / "firm.db"), cwd=tmp_path)
            assert f"{plan['id']} ceo on {root}: a plan of 2 delegation(s)" in human.stdout
            assert "→ cto: Build the site" in human.stdout and "tools: files.write" in human.stdout
            r = c.post(
                f"/api/approvals/{plan['id']}/deny", json={"reason": "not yet"}, headers=alice
            )
            assert r.status_code == 200 and r.json()["decided_by"] == "alice"
            twice = c.post(f"/api/approvals/{plan['id']}/approve", headers=alice)
            assert twice.status_code == 409
            assert office.firm.run_until(root, timeout=30).status == Status.WAITING
            assert "denied by alice — not yet" in seen[0]
            (again,) = c.get("/api/approvals").json()
        ok = firm_cli("approve", again["id"], "--db", str(tmp_path / "firm.db"), cwd=tmp_path)
        assert ok.returncode == 0 and "its subtasks may start now" in ok.stdout, ok.stderr
        assert office.firm.run_until(root, timeout=30).status == Status.DONE
    finally:
        running.stop()


def test_a_manager_that_ends_its_task_leaves_no_subtask_waiting(
    firm: Firm, model: ScriptedModel, server: ModelServer, go: Go
) -> None:
    model.when(agent="ceo").reply(
        calls(delegate("cto", "Build the site", "A site."), complete("decided to stop here"))
    )
    root = go()
    assert firm.run_until(root, timeout=30).status == Status.DONE
    (sub,) = [t for t in firm.subtree(root) if t.id != root]
    assert sub.status == Status.CANCELLED and "before its plan" in (sub.error or "")
    assert firm.store.approvals() == [] and not server.requests_for("cto")
