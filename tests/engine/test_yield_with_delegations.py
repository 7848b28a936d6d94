"""A reply that only delegates ends its turn in its delegations' own commit (firm/turnend.py,
Store.delegate_and_yield): the manager is `waiting` after one write, its slot is free for its
reports in that write, and everything a settle that yields guarantees still holds."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from firm.api import Firm
from firm.audit.verify import verify_bundle
from firm.endcall import SubtaskCall, with_calls
from firm.engine import Engine
from firm.errors import TaskNotHeld
from firm.events import EventKind, transition_problems
from firm.org import OrgChart
from firm.session import Session
from firm.store import NewTask, SqlStore, open_store
from firm.tasks import Outcome, Status, delegation_key, subtask_id
from firm.testing import FunctionBrain
from tests.support import firm_cli
from tests.support.brains import TEAM, PeakCount, two_levels
from tests.support.watch import wait_in_store

from .test_crash_safety import start
from .test_delegation_claims import held_root, parts, sqlite_store  # noqa: F401

ORG = two_levels("Yield Co", 2, 2)


def test_a_manager_that_delegates_waits_after_one_commit(
    store_url: str, org_factory: Callable[[str], OrgChart], tmp_path: Path
) -> None:
    commits: list[list[tuple[str, str | None]]] = []
    with Firm(store_url, heartbeat=0.2) as firm:
        stop = firm.store.subscribe(
            lambda events: commits.append([(str(e.kind), e.task_id) for e in events])
        )
        root = firm.run(org_factory(ORG), "Ship it", workspace=tmp_path / "ws", timeout=60)
        stop()
        tasks = firm.subtree(root.id)
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
    assert root.status == Status.DONE
    assert report.verified, [c.line() for c in report.checks]
    managers = [t for t in tasks if not t.assignee.startswith("e")]
    assert len(managers) == 3
    for m in managers:
        # From its first claim to its first `waiting`, the turn wrote one commit: its
        # thought, its delegations and its yield together.
        mine = [i for i, c in enumerate(commits) if any(tid == m.id for _, tid in c)]
        started = next(i for i in mine if ("started", m.id) in commits[i])
        waited = next(i for i in mine if ("waiting", m.id) in commits[i])
        assert [i for i in mine if started < i <= waited] == [waited]
        kinds = [k for k, tid in commits[waited] if tid == m.id]
        assert kinds[0] == EventKind.THOUGHT and kinds[-1] == EventKind.WAITING
        assert [k for k, _ in commits[waited]].count("delegated") == 2
    log = [(i, k, t) for i, c in enumerate(commits) for k, t in c]
    assert transition_problems(log) == []


def test_its_slot_is_free_for_its_reports_in_that_commit(
    sqlite_store: SqlStore,  # noqa: F811
    tmp_path: Path,
) -> None:
    store = sqlite_store
    counter = PeakCount()
    # Two slots, four reports: the CEO's own slot takes one of them in its delegation's
    # commit (run next by its own thread); before, its reports had one slot there.
    with Engine(store, max_concurrent=2, heartbeat=30, brain=counter.brain) as engine:
        root = engine.submit(TEAM, "Ship it", workspace=tmp_path / "ws")
        done = engine.run_until(root.id, timeout=60)
    assert done.status == Status.DONE
    assert counter.peak <= 2 and engine.peak_running <= 2
    log = store.events_after(0, limit=1000)
    (commit,) = {e.ts for e in log if e.kind == "delegated"}
    together = [(e.kind, e.task_id) for e in log if e.ts == commit]
    assert ("waiting", root.id) in together
    assert [k for k, _ in together].count("started") == 2


def test_the_delegations_yield_and_claim_are_one_transaction(store: SqlStore) -> None:
    root = held_root(store)
    before = store.last_seq()
    thought = (EventKind.THOUGHT, root.id, "ceo", {"text": "Splitting it."})
    results, settled = store.delegate_and_yield(
        root.id, 0, parts(3), "boss", [thought], hand_over=30, limit=2
    )
    made = [r.task.id for r in results]
    assert settled.applied and settled.woke == []
    assert settled.task is not None and settled.task.status == Status.WAITING
    assert settled.task.turn == 1 and settled.task.worker_id is None
    assert [t.id for t in settled.claimed] == made[:2]
    entries = store.events_after(before)
    assert [(e.kind, e.task_id) for e in entries] == [
        *[("delegated", t) for t in made],
        ("thought", root.id),
        ("waiting", root.id),
        ("started", made[0]),
        ("started", made[1]),
    ]
    assert entries[-3].data == {"open_subtasks": 3}
    assert len({e.ts for e in entries}) == 1
    assert store.get_task(root.id).status == Status.WAITING
    # The session has ended: the engine would not settle it again, and a settle now is
    # refused as any settle of a task no longer held is.
    assert not store.settle(root.id, "boss", Outcome.yielded()).applied
    assert [t.id for t in store.claim("other", 5, 30)] == [made[2]]


def test_a_replayed_reply_whose_reports_are_done_is_woken_at_once(store: SqlStore) -> None:
    root = held_root(store)
    first = store.delegate_many(root.id, 0, parts(2), worker_id="boss")
    for report in store.claim("w2", 5, 30):  # they run while the manager's session is cut off
        assert store.settle(report.id, "w2", Outcome.done("ok")).applied
    store.release("boss", [root.id], reason="its worker stopped; it will be re-run")
    assert [t.id for t in store.claim("boss2", 1, 30)] == [root.id]
    before = store.last_seq()
    results, settled = store.delegate_and_yield(root.id, 0, parts(2), "boss2", hand_over=30)
    # The replay made nothing new; the turn ends, and as its reports are all done the
    # manager goes straight back to work (invariant 2) — on its own worker, claimed again.
    assert [r.task.id for r in results] == [r.task.id for r in first]
    assert [r.created for r in results] == [False, False]
    assert settled.woke == [root.id] and [t.id for t in settled.claimed] == [root.id]
    entries = store.events_after(before)
    assert [(e.kind, e.task_id) for e in entries] == [
        ("waiting", root.id),
        ("woken", root.id),
        ("started", root.id),
    ]
    again = store.get_task(root.id)
    assert again.status == Status.IN_PROGRESS and again.turn == 1 and again.worker_id == "boss2"


def test_without_a_hand_over_the_woken_manager_is_todo(store: SqlStore) -> None:
    root = held_root(store)
    store.delegate_many(root.id, 0, parts(1), worker_id="boss")
    (report,) = [t for t in store.claim("w2", 5, 30)]
    store.settle(report.id, "w2", Outcome.done("ok"))
    _, settled = store.delegate_and_yield(root.id, 0, parts(1), "boss")
    assert settled.woke == [root.id] and settled.claimed == []
    assert store.get_task(root.id).status == Status.TODO


@pytest.mark.parametrize("how", ["cancelled", "lost"])
def test_a_task_not_held_at_the_flush_writes_nothing(store: SqlStore, how: str) -> None:
    root = held_root(store)
    store.delegate_many(root.id, 0, parts(1), worker_id="boss")  # a replay must be refused too
    if how == "cancelled":
        store.cancel(root.id, "the plan changed", "alice")
    else:
        store.release("boss", [root.id], reason="lease lost")
        assert [t.id for t in store.claim("other", 1, 30)] == [root.id]
    before = store.last_seq()
    for items in (parts(1), parts(2)):
        with pytest.raises(TaskNotHeld):
            store.delegate_and_yield(root.id, 0, items, "boss", hand_over=30, limit=2)
    assert store.last_seq() == before
    assert [c.assignee for c in store.children(root.id)] == ["r0"]
    expected = Status.CANCELLED if how == "cancelled" else Status.IN_PROGRESS
    assert store.get_task(root.id).status == expected


def test_a_session_cancelled_before_its_flush_leaves_no_subtasks(
    store_url: str, three_levels: OrgChart, tmp_path: Path
) -> None:
    def ceo(session: Session) -> str | None:
        with session.batch_delegations() as reply:
            session.call("delegate_task", {"assignee": "cto", "title": "Build", "description": ""})
            session.store.cancel(session.task.id, "changed my mind", "alice")
            reply.end_turn()
        return None

    with Firm(store_url, brain=FunctionBrain({"ceo": ceo}), heartbeat=0.2) as firm:
        root = firm.run(three_levels, "Launch", workspace=tmp_path / "ws", timeout=60)
        firm.run_until_idle(timeout=30)
        entries = [e for e in firm.events(limit=1000) if e.task_id == root.id]
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
    assert root.status == Status.CANCELLED
    assert not [e for e in entries if e.kind in (EventKind.DELEGATED, EventKind.WAITING)]
    assert report.verified, [c.line() for c in report.checks]


def test_calls_after_the_turn_ended_are_refused(
    store_url: str, three_levels: OrgChart, tmp_path: Path
) -> None:
    said: list[str] = []

    def ceo(session: Session) -> str | None:
        if session.task.turn:
            session.call("complete_task", {"result": "merged"})
            return None
        with session.batch_delegations() as reply:
            session.call("delegate_task", {"assignee": "cto", "title": "Build", "description": ""})
            reply.end_turn()
        assert session.ended
        said.append(str(session.call("delegate_task", {"assignee": "cmo", "title": "Sell"})))
        return None

    brain = FunctionBrain({"ceo": ceo}, default=lambda s: "done")
    with Firm(store_url, brain=brain, heartbeat=0.2) as firm:
        root = firm.run(three_levels, "Launch", workspace=tmp_path / "ws", timeout=60)
        kids = [t.assignee for t in firm.subtree(root.id) if t.parent_id == root.id]
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
    assert root.status == Status.DONE and kids == ["cto"]
    assert said and said[0].startswith("error: this task has already ended (yielded)")
    assert "ended with your delegations" in said[0] and "complete_task" not in said[0]
    assert report.verified, [c.line() for c in report.checks]


def test_a_kill_after_the_commit_then_resume_does_nothing_twice(tmp_path: Path) -> None:
    (tmp_path / "company.yaml").write_text(ORG)
    common = ["--db", "state/firm.db", "--workspace", "ws", "--sim-latency", "0.5"]
    proc = start(["run", "company.yaml", "Ship it", *common], tmp_path)

    def manager_waits_on_running_reports(store: SqlStore) -> bool:
        waiting = [t for t in store.list_tasks(status="waiting") if t.parent_id is not None]
        return any(
            any(c.status == Status.IN_PROGRESS for c in store.children(t.id)) for t in waiting
        )

    try:
        wait_in_store(
            tmp_path / "state" / "firm.db",
            manager_waits_on_running_reports,
            "no manager was ever seen waiting on its running reports",
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    final = firm_cli("resume", "--db", "state/firm.db", "--json", cwd=tmp_path)
    assert final.returncode == 0, final.stderr
    store = open_store(tmp_path / "state" / "firm.db")
    try:
        tasks = store.list_tasks()
        assert len(tasks) == 7 and {t.status for t in tasks} == {Status.DONE}
        assert Counter(t.assignee for t in tasks) == Counter(
            ["ceo", "m0", "m1", "e00", "e01", "e10", "e11"]
        )
        log = store.events_after(0, 100_000)
        assert transition_problems([(e.seq, e.kind, e.task_id) for e in log]) == []
        completed = Counter(e.task_id for e in log if e.kind == "completed")
        assert set(completed) == {t.id for t in tasks} and max(completed.values()) == 1
        delegated = Counter(e.task_id for e in log if e.kind == "delegated")
        assert max(delegated.values()) == 1 and len(delegated) == 6
        waits = Counter(e.task_id for e in log if e.kind == "waiting")
        assert all(n == 1 for n in waits.values())  # no turn yielded twice
    finally:
        store.close()
    with Firm(tmp_path / "state" / "firm.db") as firm:
        (root,) = [t for t in firm.tasks() if t.parent_id is None]
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
    assert report.verified, [c.line() for c in report.checks]


def test_new_task_rows_are_what_the_store_returns(store: SqlStore) -> None:
    root = held_root(store)
    results, _ = store.delegate_and_yield(root.id, 0, [([], NewTask("x", "", "r0", "ceo"))], "boss")
    assert store.get_task(results[0].task.id) == results[0].task


@pytest.mark.parametrize("claim", [False, True])
def test_a_delegation_that_does_not_end_the_turn_carries_what_the_session_owes(
    store: SqlStore, claim: bool
) -> None:
    # A manager that goes on while the task it started runs (a team's background task): its
    # delegate_task call's record, owed once the call returned, rides the delegation's own
    # commit, inside its `delegated`, and what else is owed follows — ahead of the claim's
    # `started` — instead of a commit of their own before the next model call.
    root = held_root(store)
    before = store.last_seq()
    items = parts(1)
    made = subtask_id(delegation_key(root.id, 0, items[0][1].assignee, items[0][1].title))
    data = {
        "tool": "delegate_task",
        "args_digest": "0" * 64,
        "summary": "part",
        "checked_seq": before,
        "checked_at": 1.0,
        "allowed": True,
        "ok": True,
        "result_digest": "1" * 64,
    }
    owed = [
        SubtaskCall((EventKind.TOOL_CALL, root.id, "ceo", data), made),
        (EventKind.THOUGHT, root.id, "ceo", {"text": "Next, the other part."}),
    ]
    if claim:
        store.delegate_and_claim(root.id, 0, items, "boss", 5, 30, events=owed)
    else:
        store.delegate_many(root.id, 0, items, "boss", owed)
    entries = store.events_after(before)
    assert [(e.kind, e.task_id) for e in entries] == [
        ("delegated", made),
        ("thought", root.id),
        *([("started", made)] if claim else []),
    ]
    assert entries[0].data["call"]["summary"] == "part"
    calls = [e for e in with_calls(entries) if e.kind == EventKind.TOOL_CALL]
    assert [(c.task_id, c.agent) for c in calls] == [(root.id, "ceo")]


def test_each_delegate_task_call_is_logged_inside_its_subtasks_delegated_entry(
    store: SqlStore,
) -> None:
    # A reply's three delegate_task calls: each call's record rides the next delegation (the
    # last one's, the turn's end), right after its subtask's `delegated` — so it is written
    # inside that entry (firm/endcall.py), on both backends, and read back as the call.
    root = held_root(store)
    before = store.last_seq()
    items = parts(3)
    ids = [subtask_id(delegation_key(root.id, 0, new.assignee, new.title)) for _, new in items]

    def call(i: int) -> SubtaskCall:
        data = {
            "tool": "delegate_task",
            "args_digest": "0" * 64,
            "summary": f"part {i}",
            "checked_seq": before,
            "checked_at": 1.0,
            "allowed": True,
            "ok": True,
            "result_digest": "1" * 64,
        }
        return SubtaskCall((EventKind.TOOL_CALL, root.id, "ceo", data), ids[i])

    items = [(events if i == 0 else [call(i - 1)], new) for i, (events, new) in enumerate(items)]
    results, settled = store.delegate_and_yield(root.id, 0, items, "boss", [call(2)])
    assert settled.applied and [r.task.id for r in results] == ids
    entries = store.events_after(before)
    assert [(e.kind, e.task_id) for e in entries] == [
        *[("delegated", t) for t in ids],
        ("waiting", root.id),
    ]
    assert [e.data["call"]["summary"] for e in entries[:3]] == ["part 0", "part 1", "part 2"]
    calls = [e for e in with_calls(entries) if e.kind == EventKind.TOOL_CALL]
    assert [(c.task_id, c.agent, c.data["ok"]) for c in calls] == [(root.id, "ceo", True)] * 3
