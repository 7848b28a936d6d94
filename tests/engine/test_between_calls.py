"""What happens between two tool calls of a session: the check before each call reads the
store, and a finished call's entry is written with the session's next write (its next
call's start, a thought, the settle, or before it waits or calls its model)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.events import EventKind
from firm.session import Session
from firm.tasks import Status
from firm.testing import FunctionBrain
from tests.authority.scripted import ScriptedBrain, open_firm, write_company
from tests.support import SUBPROCESS_GUARD

ORG = """\
company: Two Calls Co
tool_modules: [crm_tools.py]
agents:
  - {id: ceo, name: Ava, title: CEO, tools: ["crm.*"]}
  - {id: dev, name: Dan, title: Analyst, reports_to: ceo, tools: ["crm.*"]}
"""


def _two_calls(between: threading.Event, go_on: threading.Event):  # type: ignore[no-untyped-def]
    def dev(session: Session) -> None:
        session.call("crm.query", {"segment": "smb"})
        between.set()
        assert go_on.wait(30)  # the cancel or revoke lands here, between the two calls
        session.call("crm.export", {"destination": "s3://out"})

    return dev


def _ceo(session: Session) -> None:
    session.call("delegate_task", {"assignee": "dev", "title": "Pull", "description": "d"})


def _run(tmp_path: Path, act: str) -> tuple[list[str], list, dict]:
    company = write_company(tmp_path / "co", ORG)
    between, go_on = threading.Event(), threading.Event()
    brain = ScriptedBrain({"ceo": _ceo, "dev": _two_calls(between, go_on)})
    with open_firm(tmp_path, brain) as firm:
        root = firm.submit(company.org_path, "Pull the list", workspace=company.folder / "ws")
        firm.engine.start()
        assert between.wait(30)
        # Straight to the store, as `firm cancel` from another process: no in-process signal
        # reaches the session, only what it reads before its next call.
        getattr(firm.store, act)(root.id, "changed our minds")
        go_on.set()
        firm.run_until_idle(timeout=30)
        events = firm.events(0, 1000)
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
        assert report.verified, [c.line() for c in report.checks]
    return company.ran(), events, {"root": root}


def test_a_cancel_between_two_calls_stops_the_second(tmp_path: Path) -> None:
    ran, events, _ = _run(tmp_path, "cancel")
    assert ran == ["crm.query"]  # the export never ran
    started = [e.data["tool"] for e in events if e.kind == EventKind.TOOL_STARTED]
    assert started == ["crm.query"]
    (query,) = [
        e for e in events if e.kind == EventKind.TOOL_CALL and e.data["tool"] == "crm.query"
    ]
    assert query.data["ok"] is True  # the first call's result is in the log all the same


def test_a_revoke_between_two_calls_denies_the_second(tmp_path: Path) -> None:
    ran, events, _ = _run(tmp_path, "revoke")
    assert ran == ["crm.query"]
    denied = [e.data for e in events if e.kind == EventKind.TOOL_DENIED]
    assert [(d["tool"], d["code"]) for d in denied][:1] == [("crm.export", "revoked")]
    (query,) = [
        e for e in events if e.kind == EventKind.TOOL_CALL and e.data["tool"] == "crm.query"
    ]
    assert query.data["ok"] is True


def test_a_result_reaches_the_log_before_the_session_waits(tmp_path: Path) -> None:
    company = write_company(tmp_path / "co", ORG)
    waiting, go_on = threading.Event(), threading.Event()

    def dev(session: Session) -> None:
        session.call("crm.query", {"segment": "smb"})
        waiting.set()
        session.sleep(0.01)  # a wait, as a model call is: what is owed is written first
        assert go_on.wait(30)

    with open_firm(tmp_path, ScriptedBrain({"ceo": _ceo, "dev": dev})) as firm:
        firm.submit(company.org_path, "Pull the list", workspace=company.folder / "ws")
        firm.engine.start()
        assert waiting.wait(30)
        deadline = time.monotonic() + 30
        seen: list = []
        while not seen and time.monotonic() < deadline:
            events = firm.events(0, 1000)
            seen = [e for e in events if e.kind == EventKind.TOOL_CALL and e.agent == "dev"]
            time.sleep(0.02)
        go_on.set()
        firm.run_until_idle(timeout=30)
    assert [e.data["tool"] for e in seen] == ["crm.query"]


WORKER = """
import sys, time
from pathlib import Path
from firm.api import Firm
from firm.testing import FunctionBrain

marker = Path(sys.argv[2])


def dev(session):
    session.call("crm.query", {"segment": "smb"})
    marker.touch()  # the body ran; its result is still owed to the log
    time.sleep(600)


def ceo(session):
    session.call("delegate_task", {"assignee": "dev", "title": "Pull", "description": "d"})


firm = Firm(sys.argv[1], brain=FunctionBrain({"ceo": ceo, "dev": dev}), heartbeat=0.1)
firm.engine.start()
time.sleep(600)
"""


def test_a_worker_killed_after_a_body_before_its_result_was_logged(
    tmp_path: Path, store_url: str
) -> None:
    """kill -9 between a body and the session's next write: as a kill during the body, the
    start is answered `interrupted` by the next session, which is told the call may have run;
    the body does not run again and the log verifies."""
    company = write_company(tmp_path / "co", ORG)
    marker = tmp_path / "ran"
    with Firm(store_url) as firm:
        root = firm.submit(company.org_path, "Pull the list", workspace=company.folder / "ws").id
    worker = subprocess.Popen([sys.executable, "-c", WORKER, store_url, str(marker)], cwd=tmp_path)
    try:
        # The kill waits for the body and for the CEO's session to have ended (waiting for
        # its report): the two sessions run side by side, and on a loaded machine the body
        # could run before the CEO's settle was written. Killed before it, the CEO's turn
        # was re-run, said "merged" and ended the run before the killed call was answered.
        deadline = time.monotonic() + SUBPROCESS_GUARD
        with Firm(store_url) as watch:
            while time.monotonic() < deadline and not (
                marker.exists() and watch.task(root).status == Status.WAITING
            ):
                time.sleep(0.05)
            assert marker.exists() and watch.task(root).status == Status.WAITING
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert company.ran() == ["crm.query"]

    briefs: list[str] = []

    def dev_again(session: Session) -> str:
        briefs.append(session.brief)
        return "checked: the list was pulled"

    def ceo_again(session: Session) -> str:
        return "merged"

    brain = FunctionBrain({"ceo": ceo_again, "dev": dev_again})
    with Firm(store_url, brain=brain, heartbeat=0.1) as firm:
        done = firm.run_until(root, timeout=60)
        assert done.status == Status.DONE, done.error
        events = firm.store.events_after(0, 10_000)
        key = firm.audit_key()
        bundle = firm.export_audit(root)
    (start,) = [e for e in events if e.kind == EventKind.TOOL_STARTED]
    (answer,) = [
        e for e in events if e.kind == EventKind.TOOL_CALL and e.data["tool"] == "crm.query"
    ]
    assert answer.data["started_seq"] == start.seq and answer.data["interrupted"] is True
    assert company.ran() == ["crm.query"]  # never run again
    assert "MAY HAVE RUN" in briefs[0] and "crm.query" in briefs[0]
    report = verify_bundle(bundle, key.public)
    assert report.verified, [c.line() for c in report.checks]
    assert "1 cut off mid-call (may have run)" in report.check("containment").detail
