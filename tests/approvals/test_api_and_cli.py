"""Deciding through the CLI (who = the OS user) and the API (who = the token's name)."""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from firm.server import AccessPolicy, Office, OfficeServer
from firm.server.access import parse_people
from firm.tasks import Status
from firm.testing import ModelServer, ScriptedModel
from tests.approvals.conftest import write_company
from tests.approvals.test_approvals import _script_transfer
from tests.support.cli import firm_cli

OFFICE_TOKEN = "office-secret"


@pytest.fixture
def office(
    tmp_path: Path, model: ScriptedModel, server: ModelServer
) -> Iterator[tuple[Office, str]]:
    company = write_company(tmp_path / "co")
    office = Office(
        company.org_path,
        db=tmp_path / "firm.db",
        brain="llm",
        brain_options=server.brain_options(timeout=5.0),
        workspace=tmp_path / "ws",
        policy=AccessPolicy(
            token=OFFICE_TOKEN,
            reads_need_token=False,
            people=parse_people("alice:tok-alice, bob:tok-bob"),
        ),
        heartbeat=0.1,
    )
    running = OfficeServer(office, "127.0.0.1", 0).start()
    yield office, running.url
    running.stop()


def _wait_for(office: Office, root: str, status: Status) -> None:
    task = office.firm.run_until(root, timeout=30)
    assert task.status == status, (task.status, task.error)


def test_approve_and_deny_through_the_api_record_the_tokens_name(
    office: tuple[Office, str], model: ScriptedModel
) -> None:
    off, url = office
    seen: list[str] = []
    _script_transfer(model, seen)
    with httpx.Client(base_url=url, timeout=30) as anon:
        root = anon.post(
            "/api/tasks",
            json={"goal": "Pay Acme"},
            headers={"Authorization": "Bearer tok-bob"},
        ).json()["id"]
        _wait_for(off, root, Status.WAITING)
        listed = anon.get("/api/approvals").json()  # reading on loopback needs no token
        assert [(a["tool"], a["args"]) for a in listed] == [
            ("payments.transfer", {"to": "acme", "amount": 100})
        ]
        aid = listed[0]["id"]
        refused = anon.post(f"/api/approvals/{aid}/approve")
        assert refused.status_code == 401
        wrong = anon.post(f"/api/approvals/{aid}/approve", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        missing = anon.post(
            "/api/approvals/A-00000000/approve", headers={"Authorization": "Bearer tok-bob"}
        )
        assert missing.status_code == 404
        no_reason = anon.post(
            f"/api/approvals/{aid}/deny", json={}, headers={"Authorization": "Bearer tok-bob"}
        )
        assert no_reason.status_code == 422
        ok = anon.post(
            f"/api/approvals/{aid}/approve",
            json={"note": "invoice checked"},
            headers={"Authorization": "Bearer tok-alice"},
        )
        assert ok.status_code == 200, ok.text
        assert (ok.json()["status"], ok.json()["decided_by"]) == ("approved", "alice")
        twice = anon.post(
            f"/api/approvals/{aid}/deny",
            json={"reason": "changed my mind"},
            headers={"Authorization": "Bearer tok-bob"},
        )
        assert twice.status_code == 409 and "first decision stands" in twice.json()["detail"]
    _wait_for(off, root, Status.DONE)
    decided = [e for e in off.firm.events(limit=10_000) if e.kind == "approval_decided"]
    assert [(e.data["by"], e.data["decision"]) for e in decided] == [("alice", "approved")]
    assert "sent 100 to acme" in seen[0]


def test_deny_through_the_api(office: tuple[Office, str], model: ScriptedModel) -> None:
    off, url = office
    seen: list[str] = []
    _script_transfer(model, seen)
    with httpx.Client(
        base_url=url, timeout=30, headers={"Authorization": f"Bearer {OFFICE_TOKEN}"}
    ) as c:
        root = c.post("/api/tasks", json={"goal": "Pay Acme"}).json()["id"]
        _wait_for(off, root, Status.WAITING)
        (a,) = c.get("/api/approvals").json()
        r = c.post(f"/api/approvals/{a['id']}/deny", json={"reason": "not this month"})
        assert r.status_code == 200 and r.json()["decided_by"] == "office token"
    _wait_for(off, root, Status.DONE)
    assert "not this month" in seen[0]


def test_firm_tokens_that_do_not_parse_say_which_entry() -> None:
    from firm.errors import FirmError

    with pytest.raises(FirmError, match="entry 2 is not NAME:TOKEN"):
        parse_people("alice:one,bob")


def test_the_cli_lists_approves_and_refuses_a_second_decision(
    tmp_path: Path, model: ScriptedModel, server: ModelServer
) -> None:
    from firm.api import Firm

    company = write_company(tmp_path / "co")
    db = str(tmp_path / "firm.db")
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
    # No engine runs now: the decision is stored, and takes effect when one starts.
    listed = firm_cli("approvals", "--db", db, "--json", cwd=tmp_path, check=True)
    (a,) = json.loads(listed.stdout)
    human = firm_cli("approvals", "--db", db, cwd=tmp_path, check=True)
    assert a["id"] in human.stdout and "payments.transfer" in human.stdout
    no_reason = firm_cli("deny", a["id"], "--db", db, cwd=tmp_path)
    assert no_reason.returncode != 0 and "--reason" in no_reason.stderr
    ok = firm_cli("approve", a["id"], "--note", "fine", "--db", db, "--json", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["decided_by"] == getpass.getuser()
    again = firm_cli("deny", a["id"], "--reason", "no", "--db", db, cwd=tmp_path)
    assert again.returncode != 0 and "first decision stands" in again.stderr
    assert "Traceback" not in again.stderr
    assert company.transfers() == []
    with Firm(db, heartbeat=0.1) as firm:
        assert firm.run_until(root, timeout=30).status == Status.DONE
    assert company.transfers() == ["acme 100"]
    assert "sent 100 to acme" in seen[0]
