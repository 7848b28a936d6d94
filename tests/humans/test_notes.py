"""Notes: a person leaves a note on a task; it is an entry of the signed log and it is in the
task's next brief — the model's request says so."""

from __future__ import annotations

import getpass
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.errors import TaskNotFound
from firm.events import EventKind
from firm.people import BadText
from firm.store import open_store
from firm.tasks import Status
from firm.testing import ModelRequest, ModelServer, ScriptedModel, calls, complete, delegate
from tests.humans.conftest import Submit
from tests.support.cli import firm_cli


def _notes_in_log(firm: Firm) -> list[tuple[str | None, str, str]]:
    return [
        (e.task_id, e.data["by"], e.data["text"])
        for e in firm.events(limit=100_000)
        if e.kind == EventKind.NOTE
    ]


def test_a_note_left_before_the_first_session_is_in_its_brief(
    firm: Firm, model: ScriptedModel, server: ModelServer, submit: Submit
) -> None:
    model.when(agent="ceo").reply(calls(complete("launched in Lisbon")))
    root = submit()
    note = firm.store.add_note(root, "alice", "  Start with Lisbon, not Berlin.\x00  ")
    assert (note.by, note.text) == ("alice", "Start with Lisbon, not Berlin.")  # canonical
    assert firm.run_until(root, timeout=30).status == Status.DONE
    (req,) = server.requests_for("ceo")
    assert "Notes people left on this task" in req.request.brief
    assert "- from alice: Start with Lisbon, not Berlin." in req.request.brief
    assert _notes_in_log(firm) == [(root, "alice", "Start with Lisbon, not Berlin.")]
    report = verify_bundle(firm.export_audit(root), firm.audit_key().public)
    assert report.verified, [c.line() for c in report.checks]


def _note_while_the_ceo_waits(
    firm: Firm, model: ScriptedModel, submit: Submit, leave_note: Callable[[str], None]
) -> None:
    """The CEO delegates to eng and waits; while eng is at work, `leave_note(root)` is called;
    then eng delivers, the CEO is woken and completes the goal."""
    eng_called = threading.Event()
    go_on = threading.Event()

    def eng_works(req: ModelRequest):  # type: ignore[no-untyped-def]
        eng_called.set()
        assert go_on.wait(60)
        return calls(complete("the landing page is up"))

    model.when(agent="ceo", woken=False).reply(calls(delegate("eng", "Build the landing page")))
    model.when(agent="eng").reply(eng_works)
    model.when(agent="ceo", woken=True).reply(calls(complete("launched")))
    root = submit()
    runner = threading.Thread(target=firm.run_until, args=(root, 90))
    runner.start()
    try:
        assert eng_called.wait(30)
        # The report can be at work before the CEO's yield is written: wait for the wait.
        deadline = time.monotonic() + 30
        while firm.task(root).status != Status.WAITING:
            assert time.monotonic() < deadline, firm.task(root).status
            time.sleep(0.01)
        leave_note(root)
    finally:
        go_on.set()
        runner.join(90)
    assert firm.task(root).status == Status.DONE


def test_a_note_on_a_waiting_manager_is_in_its_next_wake(
    firm: Firm, model: ScriptedModel, server: ModelServer, submit: Submit
) -> None:
    def leave_note(root: str) -> None:
        firm.store.add_note(root, "bob", "Budget is capped at 5k.")

    _note_while_the_ceo_waits(firm, model, submit, leave_note)
    first, wake = server.requests_for("ceo")
    assert "Budget is capped" not in first.request.brief
    assert "- from bob: Budget is capped at 5k." in wake.request.brief
    (eng,) = server.requests_for("eng")
    assert "Budget is capped" not in eng.request.brief  # a note is for its own task


def test_a_note_from_another_process_on_a_waiting_manager_is_in_its_next_wake(
    firm: Firm, model: ScriptedModel, server: ModelServer, submit: Submit, db: str
) -> None:
    # The engine knows the notes its own process writes without reading them back; one left
    # from the command line is news it must still find.
    def leave_note(root: str) -> None:
        # Another process, as far as the engine can tell: a store of its own on the same db.
        other = open_store(db)
        try:
            other.add_note(root, "carol", "Ship on Friday.")
        finally:
            other.close()

    _note_while_the_ceo_waits(firm, model, submit, leave_note)
    first, wake = server.requests_for("ceo")
    assert "Ship on Friday" not in first.request.brief
    assert "- from carol: Ship on Friday." in wake.request.brief


def test_a_note_on_a_finished_task_is_recorded_and_changes_nothing(
    firm: Firm, model: ScriptedModel, server: ModelServer, submit: Submit
) -> None:
    model.when(agent="ceo").reply(calls(complete("done")))
    root = submit()
    assert firm.run_until(root, timeout=30).status == Status.DONE
    firm.store.add_note(root, "alice", "Nice work.")
    firm.run_until_idle(timeout=5)
    assert firm.task(root).status == Status.DONE
    assert len(server.requests_for("ceo")) == 1  # no session ran for it
    assert [n.text for n in firm.store.notes(root)] == ["Nice work."]


def test_bad_notes_are_refused(firm: Firm, submit: Submit) -> None:
    root = submit()
    with pytest.raises(TaskNotFound):
        firm.store.add_note("T-00000000", "alice", "hello")
    with pytest.raises(BadText, match="empty"):
        firm.store.add_note(root, "alice", " \n\x00 ")
    with pytest.raises(BadText, match="too long"):
        firm.store.add_note(root, "alice", "x" * 4001)
    with pytest.raises(BadText, match="too long"):
        firm.store.add_note(root, "alice", "x" * 10_000_000)
    assert firm.store.notes(root) == []


def test_the_cli_leaves_and_lists_notes_as_the_os_user(
    tmp_path: Path, model: ScriptedModel, server: ModelServer, org_path: Path
) -> None:
    db = str(tmp_path / "firm.db")
    with Firm(db) as firm:
        root = firm.submit(
            org_path, "Launch", brain="llm", brain_options=server.brain_options(timeout=5.0)
        ).id
    left = firm_cli("note", root, "Mind the GDPR review.", "--db", db, cwd=tmp_path)
    assert left.returncode == 0, left.stderr
    assert "next brief" in left.stdout
    listed = firm_cli("notes", root, "--db", db, "--json", cwd=tmp_path, check=True)
    (n,) = json.loads(listed.stdout)
    assert (n["by"], n["text"], n["task_id"]) == (getpass.getuser(), "Mind the GDPR review.", root)
    unknown = firm_cli("note", "T-00000000", "hello", "--db", db, cwd=tmp_path)
    assert unknown.returncode != 0 and "no task" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    empty = firm_cli("note", root, "   ", "--db", db, cwd=tmp_path)
    assert empty.returncode != 0 and "empty" in empty.stderr

    model.when(agent="ceo").reply(calls(complete("launched")))
    with Firm(db, heartbeat=0.1) as firm:
        assert firm.run_until(root, timeout=30).status == Status.DONE
    (req,) = server.requests_for("ceo")
    assert f"- from {getpass.getuser()}: Mind the GDPR review." in req.request.brief
