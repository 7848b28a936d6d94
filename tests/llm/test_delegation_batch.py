"""The delegate_task calls of one model reply are written together: the reports start at once."""

from __future__ import annotations

from collections.abc import Callable

from firm.api import Firm
from firm.chain import digest
from firm.endcall import with_calls
from firm.org import OrgChart
from firm.tasks import Status
from firm.testing import ScriptedModel, calls, complete, delegate, text, write_file

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
    # One commit: the delegations' entries form one unbroken run of the log, with one time;
    # each delegate_task call's record is inside its subtask's `delegated` (firm/endcall.py).
    log = firm.events(limit=10_000)
    delegated = [e.seq for e in log if e.kind == "delegated"]
    span = [e for e in log if delegated[0] <= e.seq <= delegated[-1]]
    assert len(delegated) == 3
    assert [e.kind for e in span] == ["delegated"] * 3
    assert [e.data["call"]["tool"] for e in span] == ["delegate_task"] * 3
    assert len({e.ts for e in span}) == 1
    # The reply only delegated, so it ended the turn in that commit: the boss waits from
    # there on, its `waiting` entry written with the subtasks.
    after = [e for e in log if e.seq > delegated[-1] and e.ts == span[0].ts]
    assert [(e.kind, e.task_id) for e in after][:1] == [("waiting", root.id)]
    # Every delegate_task call is on record, the boss's, and what the model was told names the
    # task that was created (the id is known before the batch is written).
    tool_calls = [
        e for e in with_calls(log) if e.kind == "tool_call" and e.data["tool"] == "delegate_task"
    ]
    assert {(e.task_id, e.agent) for e in tool_calls} == {(root.id, "boss")}
    told = {digest(f"delegated to {t.assignee} as task {t.id}") for t in reports}
    assert {e.data["result_digest"] for e in tool_calls} == told


def test_a_reply_that_also_writes_a_file_yields_when_the_session_ends(
    org_factory: Callable[[str], OrgChart], model: ScriptedModel, firm: Firm, run_llm: Runner
) -> None:
    model.when(agent="boss", woken=False).reply(
        calls(delegate("r1", "r1 part", "Your part."), write_file("plan.md", "# Plan")),
        text("Waiting for r1."),
    )
    model.when(agent="r1").reply(calls(complete("r1 done")))
    model.when(agent="boss", woken=True).reply(calls(complete("all done")))

    root = run_llm(org_factory(ORG))

    assert root.status == Status.DONE, root.error
    log = firm.events(limit=10_000)
    (made,) = [e for e in log if e.kind == "delegated"]
    (waited,) = [e for e in log if e.kind == "waiting"]
    # Not a reply of delegations only: the model was called again, and the turn ended with
    # the session, by a settle of its own.
    assert waited.ts != made.ts
    assert sum(e.kind == "model_call" and e.task_id == root.id for e in log) == 3
