"""A `firm run` killed with SIGKILL at random points, again and again, then resumed."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from firm.events import transition_problems
from firm.store import open_store
from firm.tasks import Status
from tests.support import SUBPROCESS_GUARD, firm_cli
from tests.support.brains import two_levels

ORG = two_levels("Crashy", 3, 3, ceo="Ava")


def start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "FIRM_DB"}
    return subprocess.Popen(
        [sys.executable, "-m", "firm", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def first_kill_after_delegation(proc: subprocess.Popen[str]) -> None:
    """Wait until some manager has delegated and is still in its turn (lingering), then kill.

    The run's own event lines say so the moment the delegation commits, and a blocked read
    of a pipe needs no CPU to notice. Watching the store for it instead (open it, then a
    query every 10 ms) took CPU the test's process did not get on a loaded machine (load
    13-20, a tenth of a core each): the managers' lingering, 0.4 s of wall time, could all
    pass unseen, and the test then waited for a delegation that was never coming."""
    delegated = threading.Event()

    def read() -> None:  # reads to the end, so the pipe never fills and stalls the run
        assert proc.stdout is not None
        for line in proc.stdout:
            if " delegated " in line:
                delegated.set()

    threading.Thread(target=read, daemon=True).start()
    assert delegated.wait(SUBPROCESS_GUARD), (
        f"no manager ever delegated (the run exited {proc.poll()})"
    )


def test_killed_runs_resume_to_the_same_tree_with_nothing_lost_or_done_twice(
    tmp_path: Path,
) -> None:
    (tmp_path / "company.yaml").write_text(ORG)
    rng = random.Random(1234)
    # Sessions linger after acting, so kills land after delegations and file writes too: long
    # enough that the first kill, sent when a manager is seen to have delegated, still finds
    # its session open on a loaded machine.
    common = ["--db", "state/firm.db", "--workspace", "ws", "--sim-latency", "0.15",
              "--sim-linger", "0.4"]  # fmt: skip
    kills = 0
    proc = start(["run", "company.yaml", "Ship the product", *common], tmp_path)
    # The first kill lands on purpose inside a manager's turn, after it has delegated; the
    # others at random points.
    first_kill_after_delegation(proc)
    while True:
        if kills:
            time.sleep(rng.uniform(0.5, 1.5))
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        if kills >= 5:
            break
        proc = start(["resume", "--db", "state/firm.db"], tmp_path)
    assert kills >= 3, "the run finished before it could be interrupted; slow it down"

    final = firm_cli("resume", "--db", "state/firm.db", "--json", cwd=tmp_path)
    assert final.returncode == 0, final.stderr
    summaries = json.loads(final.stdout)  # a list: [] when nothing was left to resume
    assert isinstance(summaries, list) and all(s["status"] == "done" for s in summaries)

    store = open_store(tmp_path / "state" / "firm.db")
    try:
        (root_id,) = {t.root_id for t in store.list_tasks()}
        tasks = store.subtree(root_id)
        # The tree a run that never crashed would have: 1 + 3 + 9 tasks, one per agent.
        assert len(tasks) == 13
        assert Counter(t.assignee for t in tasks) == Counter(
            ["ceo"] + [f"m{i}" for i in range(3)] + [f"e{i}{j}" for i in range(3) for j in range(3)]
        )
        assert {t.status for t in tasks} == {Status.DONE}
        events = store.events_after(0, 100_000)
        # Killed five times, every task still moved only as the state machine allows.
        assert transition_problems([(e.seq, e.kind, e.task_id) for e in events]) == []
        completed = Counter(e.task_id for e in events if e.kind == "completed")
        assert set(completed) == {t.id for t in tasks}
        assert max(completed.values()) == 1  # none completed twice
        assert store.list_tasks(status="waiting") == []
        requeued = [e for e in events if e.kind == "requeued"]
        assert requeued, "some session must have been cut off and re-run"
        # At least one manager was cut off after delegating, and its re-run found its
        # subtasks instead of making new ones (the tree above has one task per agent).
        replayed = [
            e.task_id
            for e in events
            if e.kind == "started" and e.data["turn"] == 0 and e.data["attempt"] > 1
            and any(d.kind == "delegated" and d.data["parent_id"] == e.task_id
                    and d.seq < e.seq and d.data.get("superseded") is None for d in events)
        ]  # fmt: skip
        assert replayed, "no kill landed after a delegation; the test proved nothing"
        for leaf in (t for t in tasks if t.assignee.startswith("e")):
            assert (tmp_path / "ws" / leaf.files[0]).is_file()
    finally:
        store.close()


def test_ctrl_c_exits_130_and_leaves_everything_resumable(tmp_path: Path) -> None:
    (tmp_path / "company.yaml").write_text(ORG)
    # Turns of 1 s: the run lasts several seconds, so it cannot end between the test seeing
    # a session and the Ctrl-C landing, however slowly a loaded machine runs the test (with
    # 0.2 s turns it did, at load 12: exit 0).
    proc = start(
        [
            "run",
            "company.yaml",
            "Ship it",
            "--db",
            "s.db",
            "--workspace",
            "ws",
            "--sim-latency",
            "1.0",
        ],
        tmp_path,
    )
    store = open_store(tmp_path / "s.db")
    deadline = time.monotonic() + SUBPROCESS_GUARD
    while not store.list_tasks(status="in_progress"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (store.counts(), err[-2000:])
    assert "firm resume" in err
    assert store.list_tasks(status="in_progress") == []  # sessions were handed back
    store.close()
    resumed = firm_cli("resume", "--db", "s.db", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "✔ " in resumed.stdout or "done" in resumed.stdout
