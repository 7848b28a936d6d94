"""Exactly once across a kill -9: an approved call is claimed durably before its body runs,
so a worker killed during the body is reported as "may have run", never run twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from firm.api import Firm
from firm.tasks import Status
from firm.testing import ModelServer, ScriptedModel
from tests.approvals.conftest import ORG, write_company
from tests.approvals.test_approvals import _script_transfer
from tests.support import SUBPROCESS_GUARD

SLOW_TOOLS = '''
import os, time
import firm

LEDGER = {ledger!r}
SLOW = {slow!r}


@firm.tool("payments.transfer")
def transfer(to: str, amount: int) -> str:
    """Send money (slowly, while the test holds SLOW)."""
    with open(LEDGER, "a", encoding="utf-8") as f:
        f.write(f"start {{to}} {{amount}}\\n")
    while os.path.exists(SLOW):
        time.sleep(0.05)
    return f"sent {{amount}} to {{to}}"
'''

WORKER = """
import sys, time
from firm.api import Firm
firm = Firm(sys.argv[1], heartbeat=0.1)
firm.engine.start()
time.sleep(600)
"""


def test_a_worker_killed_during_an_approved_body_does_not_run_it_twice(
    tmp_path: Path, model: ScriptedModel, server: ModelServer, db: str
) -> None:
    company = write_company(tmp_path / "co", org=ORG)
    slow = tmp_path / "slow"
    (company.folder / "pay_tools.py").write_text(
        SLOW_TOOLS.format(ledger=str(company.ledger), slow=str(slow)), encoding="utf-8"
    )
    seen: list[str] = []
    _script_transfer(model, seen)
    with Firm(db, heartbeat=0.1) as firm:
        root = firm.submit(
            company.org_path,
            "Pay Acme",
            brain="llm",
            brain_options=server.brain_options(timeout=5.0),
            workspace=company.folder / "ws",
        ).id
        assert firm.run_until(root, timeout=30).status == Status.WAITING
        (a,) = firm.store.approvals(status="pending")
    with Firm(db) as person:  # no engine runs while the person decides
        person.store.decide_approval(a.id, "approved", "alice")
    assert company.transfers() == []  # approved; no engine has run it yet

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
        done = firm.run_until(root, timeout=30)
        assert done.status == Status.DONE, done.error
        assert firm.store.get_approval(a.id).status == "interrupted"
    assert company.transfers() == ["start acme 100"]  # not run a second time
    assert "MAY HAVE RUN" in seen[0]
