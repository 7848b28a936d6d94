"""A session's brief is written only when its brain reads it, and says what stood when the
session opened, however late it is read: a note left meanwhile waits for the next session."""

from __future__ import annotations

from pathlib import Path

from firm.api import Firm
from firm.org import OrgChart
from firm.session import Session
from firm.tasks import Status
from firm.testing import FunctionBrain


def test_a_brief_read_late_is_the_one_the_session_opened_with(
    tmp_path: Path, three_levels: OrgChart
) -> None:
    briefs: list[tuple[int, str]] = []

    def ceo(session: Session) -> str | None:
        if session.task.turn == 0:
            # A person leaves a note while the session works, before it reads its brief.
            session.store.add_note(session.task.id, "alice", "Start with Lisbon.")
            briefs.append((0, session.brief))
            assert session.brief is session.brief  # written once
            session.call("delegate_task", {"assignee": "cto", "title": "Plan", "description": ""})
            return None
        briefs.append((1, session.brief))
        return "launched"

    def cto(session: Session) -> str:
        return "planned"  # never reads its brief

    brain = FunctionBrain({"ceo": ceo, "cto": cto})
    with Firm(tmp_path / "firm.db", brain=brain, heartbeat=0.2) as firm:
        root = firm.run(three_levels, "Launch in Lisbon", workspace=tmp_path / "ws", timeout=60)
    assert root.status == Status.DONE
    (turn0, first), (turn1, second) = briefs
    assert (turn0, turn1) == (0, 1)
    assert first.startswith(f"Task {root.id}: Launch in Lisbon")
    assert "Start with Lisbon." not in first
    assert "- from alice: Start with Lisbon." in second
    assert "planned" in second  # the report's result, as a woken manager's brief says
