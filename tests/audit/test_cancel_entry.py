"""A subtree's cancel in an exported bundle: one entry, its ended tasks listed beside it and
checked against the digest the chain vouches for; the verifier reads it as one ending per task."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.session import Session
from firm.tasks import Task
from tests.audit.conftest import AUDIT_CO
from tests.authority.scripted import ScriptedBrain, delegate, write_company


@dataclass
class Cancelled:
    firm: Firm
    root: Task
    bundle: dict[str, Any]


@pytest.fixture
def cancelled(tmp_path: Path) -> Iterator[Cancelled]:
    """The CEO hands three parts to the lead, who hands each to four reviewers; the run is
    cancelled from the top while the reviewers work."""
    company = write_company(tmp_path / "co", AUDIT_CO)
    release = threading.Event()
    brain = ScriptedBrain({})

    def rev(session: Session) -> None:
        brain.call(session, "crm.query", {"segment": "q3", "rows": 5})
        assert release.wait(120)  # released once all twelve are at work; a hang bound

    scripts: dict[str, Any] = {
        "ceo": [delegate("lead", f"Part {i}") for i in range(3)],
        "lead": [delegate("rev", f"Review {i}", limits={"max_rows": 10}) for i in range(4)],
        "rev": rev,
    }
    # Room for every session at once: the blocked reviewers must not hold up the lead's turns.
    brain.scripts = scripts
    db = tmp_path / "state" / "firm.db"
    with Firm(db, brain=brain, heartbeat=0.05, max_concurrent=20) as firm:
        root = firm.submit(company.org_path, "Review Q3", workspace=company.folder / "ws")
        firm.engine.start()
        deadline = time.monotonic() + 120  # a hang bound: sixteen sessions on a loaded machine
        # Cancelled once every reviewer has made its call: a call checked before the cancel
        # whose body runs after it is another matter (the session's standing check).
        while len(brain.results("rev", "crm.query")) < 12:
            assert time.monotonic() < deadline, "the reviews never started"
            time.sleep(0.05)
        firm.cancel(root.id, "the quarter was restated")
        release.set()
        firm.run_until_idle(timeout=30)
        yield Cancelled(firm, firm.task(root.id), firm.export_audit(root.id))


def _the_cancel(bundle: dict[str, Any]) -> dict[str, Any]:
    (e,) = [e for e in bundle["entries"] if e["kind"] == "cancelled"]
    return e


def test_the_bundle_carries_one_cancel_listing_the_tree_and_verifies(cancelled: Cancelled) -> None:
    e = _the_cancel(cancelled.bundle)
    ids = sorted(t.id for t in cancelled.firm.tasks())
    assert e["task_id"] == cancelled.root.id and e["data"]["ended"] == 16
    assert e["ended_ids"] == ids
    report = verify_bundle(cancelled.bundle, cancelled.firm.audit_key().public)
    assert report.verified, "\n".join(c.line() for c in report.checks)  # not partial: all ended


def test_a_subtree_export_discloses_the_cancel_above_it(cancelled: Cancelled) -> None:
    part = next(t for t in cancelled.firm.tasks() if t.assignee == "lead")
    bundle = cancelled.firm.export_audit(part.id)
    assert _the_cancel(bundle)["task_id"] == cancelled.root.id
    report = verify_bundle(bundle, cancelled.firm.audit_key().public)
    assert report.verified, [c.line() for c in report.checks]


@pytest.mark.parametrize("how", ["drop", "swap", "missing"])
def test_a_tampered_list_of_ended_tasks_fails_integrity(cancelled: Cancelled, how: str) -> None:
    bundle = copy.deepcopy(cancelled.bundle)
    e = _the_cancel(bundle)
    if how == "drop":  # hide that one task was cancelled
        e["ended_ids"] = e["ended_ids"][1:]
    elif how == "swap":
        e["ended_ids"] = [*e["ended_ids"][:-1], "T-not-a-task"]
    else:
        del e["ended_ids"]
    report = verify_bundle(bundle, cancelled.firm.audit_key().public)
    assert not report.holds
    assert "list of ended tasks" in report.check("integrity").detail
