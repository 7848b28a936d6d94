"""No body runs unrecorded: a call's `tool_started` entry is committed before its body, so a
worker killed in the middle of a body leaves a record that says the call may have run, the
next session is told so, and the verifier proves every body had its record first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.events import EventKind
from firm.tasks import Status
from firm.testing import ModelRequest, ModelServer, ScriptedModel, call, calls, complete
from tests.approvals.conftest import write_company
from tests.approvals.test_kill9 import SLOW_TOOLS, WORKER
from tests.audit.conftest import rehash
from tests.support import SUBPROCESS_GUARD

ORG = """\
company: Pay Co
tool_modules: [pay_tools.py]
agents:
  - {{id: cfo, name: Cam, title: CFO, tools: ["payments.*"]}}
"""


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel(autopilot=False)


@pytest.fixture
def server(model: ScriptedModel) -> Iterator[ModelServer]:
    with ModelServer(model) as s:
        yield s


@pytest.fixture
def db(store_url: str) -> str:
    return store_url


def _script(model: ScriptedModel, seen: list[str]) -> None:
    def first(req: ModelRequest):  # type: ignore[no-untyped-def]
        return calls(call("payments_transfer", to="acme", amount=100))

    def after(req: ModelRequest):  # type: ignore[no-untyped-def]
        seen.append(req.brief)
        return calls(complete("paid"))

    model.when(agent="cfo", match=lambda r: "sent 100" not in str(r.messages)
               and "MAY HAVE RUN" not in r.brief).reply(first)  # fmt: skip
    model.when(agent="cfo", match=lambda r: "sent 100" in str(r.messages)
               or "MAY HAVE RUN" in r.brief).reply(after)  # fmt: skip


def _events(firm: Firm, kind: str) -> list:
    return [e for e in firm.store.events_after(0, 10_000) if e.kind == kind]


def test_a_call_is_recorded_before_its_body_and_answered_after(
    tmp_path: Path, model: ScriptedModel, server: ModelServer, db: str
) -> None:
    company = write_company(tmp_path / "co", org=ORG)
    _script(model, [])
    with Firm(db, heartbeat=0.1) as firm:
        root = firm.submit(
            company.org_path, "Pay Acme", brain="llm",
            brain_options=server.brain_options(timeout=5.0), workspace=company.folder / "ws",
        ).id  # fmt: skip
        assert firm.run_until(root, timeout=30).status == Status.DONE
        (start,) = _events(firm, EventKind.TOOL_STARTED)
        tool_calls = _events(firm, EventKind.TOOL_CALL)
        (ran,) = [e for e in tool_calls if e.data["tool"] != "complete_task"]
        assert start.data["tool"] == "payments.transfer" and start.seq < ran.seq
        assert ran.data["started_seq"] == start.seq and ran.data["ok"]
        assert start.data["args_digest"] == ran.data["args_digest"]
        key = firm.audit_key()
        bundle = firm.export_audit(root)
    report = verify_bundle(bundle, key.public)
    assert report.verified, [c.line() for c in report.checks]
    assert "1 body(ies) ran after their record was written" in report.check("containment").detail
    # An insider points the call at another entry and re-signs: the record no longer precedes it.
    for e in bundle["entries"]:
        if e["kind"] == "tool_call" and e["data"].get("started_seq") == start.seq:
            e["data"]["started_seq"] = start.seq - 1
    forged = verify_bundle(rehash(bundle, key), key.public)
    assert forged.check("integrity").verdict == "PASS"
    assert forged.check("containment").verdict == "FAIL"
    assert "names no earlier start of its task" in forged.check("containment").detail


def test_a_worker_killed_in_a_body_leaves_a_record_that_it_may_have_run(
    tmp_path: Path, model: ScriptedModel, server: ModelServer, db: str
) -> None:
    company = write_company(tmp_path / "co", org=ORG)
    slow = tmp_path / "slow"
    (company.folder / "pay_tools.py").write_text(
        SLOW_TOOLS.format(ledger=str(company.ledger), slow=str(slow)), encoding="utf-8"
    )
    seen: list[str] = []
    _script(model, seen)
    with Firm(db) as firm:
        root = firm.submit(
            company.org_path, "Pay Acme", brain="llm",
            brain_options=server.brain_options(timeout=5.0), workspace=company.folder / "ws",
        ).id  # fmt: skip
    slow.touch()
    worker = subprocess.Popen([sys.executable, "-c", WORKER, db], cwd=tmp_path)
    try:
        deadline = time.monotonic() + SUBPROCESS_GUARD
        while not company.transfers() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert company.transfers() == ["start acme 100"]
        os.kill(worker.pid, signal.SIGKILL)  # in the middle of the body
        worker.wait(10)
    finally:
        if worker.poll() is None:
            worker.kill()
    slow.unlink()

    with Firm(db, heartbeat=0.1) as firm:
        with Firm(db) as look:  # what the killed worker left: the start, and no answer
            (start,) = _events(look, EventKind.TOOL_STARTED)
            assert not [e for e in _events(look, EventKind.TOOL_CALL)
                        if e.data.get("started_seq") == start.seq]  # fmt: skip
        done = firm.run_until(root, timeout=60)
        assert done.status == Status.DONE, done.error
        (answer,) = [e for e in _events(firm, EventKind.TOOL_CALL)
                     if e.data.get("started_seq") == start.seq]  # fmt: skip
        assert answer.data["interrupted"] is True and answer.data["ok"] is False
        key = firm.audit_key()
        bundle = firm.export_audit(root)
    assert company.transfers() == ["start acme 100"]  # the engine never runs it again
    assert "MAY HAVE RUN" in seen[0] and "payments.transfer" in seen[0]
    report = verify_bundle(bundle, key.public)
    assert report.verified, [c.line() for c in report.checks]
    assert "1 cut off mid-call (may have run)" in report.check("containment").detail
