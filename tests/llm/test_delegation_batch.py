"""The delegate_task calls of one model reply are written together: the reports start at once."""

from __future__ import annotations

from collections.abc import Callable

from firm.api import Firm
from firm.chain import digest
from firm.org import OrgChart
from firm.tasks import Status
from firm.testing import ScriptedModel, calls, complete, delegate

from .conftest import Runner

ORG = """
company: Small Co
agents:
  - {id: boss, name: Boss, title: Engineering Manager}
  - {id: r1, name: R1, title: Engineer, reports_to: boss}
  - {id: r2, name: R2, title: Engineer, reports_to: boss}
  - {id: r3, name: R3, title: Engineer, reports_to: boss}
"""


def test_one_reply_s_delegations_are_one_transaction(
    org_factory: Callable[[str], OrgChart], model: ScriptedModel, firm: Firm, run_llm: Runner
) -> None:
    model.when(agent="boss", woken=False).reply(
        calls(*[delegate(r, f"{r} part", f"Your part, {r}.") for r in ("r1", "r2", "r3")])
    )
    for r in ("r1", "r2", "r3"):
        model.when(agent=r).reply(calls(complete(f"{r} done")))
    model.when(agent="boss", woken=True).reply(calls(complete("all done")))

    root = run_llm(org_factory(ORG))

    assert root.status == Status.DONE, root.error
    reports = [t for t in firm.subtree(root.id) if t.parent_id == root.id]
    # In the order delegated: each is created a microsecond after the one before it.
    assert [t.assignee for t in reports] == ["r1", "r2", "r3"]
    # One commit: the delegations' entries (each delegate_task call's own record between them)
    # form one unbroken run of the log, with one time.
    log = firm.events(limit=10_000)
    delegated = [e.seq for e in log if e.kind == "delegated"]
    span = [e for e in log if delegated[0] <= e.seq <= delegated[-1]]
    assert len(delegated) == 3
    assert [e.kind for e in span] == ["delegated", "tool_call"] * 2 + ["delegated"]
    assert len({e.ts for e in span}) == 1
    # Every delegate_task call is on record, and what the model was told names the task that
    # was created (the id is known before the batch is written).
    tool_calls = [e for e in log if e.kind == "tool_call" and e.data["tool"] == "delegate_task"]
    told = {digest(f"delegated to {t.assignee} as task {t.id}") for t in reports}
    assert {e.data["result_digest"] for e in tool_calls} == told
