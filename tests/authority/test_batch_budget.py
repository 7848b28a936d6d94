"""A reply's delegations (written together, in one transaction) carve their budgets out of
what the manager has left exactly as the same calls made one at a time do: each sees what
the reply's earlier delegations reserved, though none is in the store yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from firm.api import Firm
from firm.authority.grants import Grant
from firm.org import parse_org
from firm.session import Session
from firm.testing import FunctionBrain

ORG = """
company: Budgets
agents:
  - {{id: ceo, name: Ava, title: Chief Executive Officer, budget_tokens: {ceo}}}
  - {{id: cto, name: Bo, title: Chief Technology Officer, reports_to: ceo, budget_tokens: 800}}
  - {{id: cmo, name: Cy, title: Chief Marketing Officer, reports_to: ceo, budget_tokens: 800}}
"""


def run(tmp_path: Path, ceo_budget: int, batched: bool) -> tuple[dict[str, int | None], list[str]]:
    """The CEO delegates to the CTO, then the CMO, in one reply or one call at a time. Returns
    each subtask's budget and what each delegate_task call answered."""
    answers: list[str] = []

    def ceo(session: Session) -> str | None:
        if session.task.turn > 0:
            return "done"

        def both() -> None:
            for who in ("cto", "cmo"):
                args = {"assignee": who, "title": f"Work for {who}", "description": ""}
                result = session.call("delegate_task", args)
                answers.append("ok" if result.ok else result.content)

        if batched:
            with session.batch_delegations():
                both()
        else:
            both()
        return None if session.delegated else "nothing delegated"

    brain = FunctionBrain({"ceo": ceo, "cto": lambda s: "built", "cmo": lambda s: "sold"})
    org = parse_org(ORG.format(ceo=ceo_budget), "<budgets>")
    with Firm(tmp_path / "firm.db", brain=brain, heartbeat=0.2) as firm:
        firm.run(org, "Launch", workspace=tmp_path / "ws", timeout=60)
        budgets = {
            t.assignee: Grant.from_dict(t.grant or {}).budget_tokens
            for t in firm.tasks()
            if t.parent_id is not None
        }
    return budgets, answers


@pytest.mark.parametrize("batched", [False, True], ids=["one at a time", "one reply"])
def test_a_replys_delegations_share_the_managers_budget(tmp_path: Path, batched: bool) -> None:
    budgets, answers = run(tmp_path, 1000, batched)
    assert answers == ["ok", "ok"]
    assert budgets == {"cto": 800, "cmo": 200}  # never more than the CEO's 1,000 in all


@pytest.mark.parametrize("batched", [False, True], ids=["one at a time", "one reply"])
def test_a_delegation_after_the_budget_is_reserved_is_denied(tmp_path: Path, batched: bool) -> None:
    budgets, answers = run(tmp_path, 800, batched)
    assert answers[0] == "ok"
    assert "budget_exhausted" in answers[1]
    assert budgets == {"cto": 800}
