"""The trail end to end: revocation in the bundle, other runs withheld, subtree exports,
checkpoints, the key pair on disk, and the `firm audit` commands."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path

from firm.audit.keys import PRIVATE_NAME, load_or_create_key, signature_valid
from firm.audit.verify import verify_bundle
from firm.chain import digest
from firm.session import Session
from tests.audit.conftest import AUDIT_CO, Audited, audit_scripts, entry
from tests.authority.scripted import ScriptedBrain, open_firm, write_company
from tests.support import firm_cli


def forge_allowed_call(audited: Audited, assignee: str, checked_seq: int | None = None) -> None:
    """What an engine that let a call through without checking would have logged."""
    task = audited.task(assignee)
    store = audited.firm.store
    store.append_events(
        [
            (
                "tool_call",
                task.id,
                assignee,
                {
                    "tool": "crm.query",
                    "allowed": True,
                    "ok": True,
                    "args_digest": digest({"rows": 1}),
                    "result_digest": digest("1 row"),
                    "summary": "rows=1",
                    "checked_seq": store.last_seq() if checked_seq is None else checked_seq,
                    "checked_at": round(time.time(), 6),
                    "limited_args": {"rows": 1},
                    "ceilings": {"rows": "max_rows"},
                },
            )
        ]
    )


def test_a_revocation_is_in_the_bundle_and_an_allow_after_it_fails_containment(
    audited: Audited,
) -> None:
    lead = audited.task("lead")
    audited.firm.revoke(lead.id, "audit found a problem")
    honest = audited.firm.export_audit(audited.root.id)
    report = verify_bundle(honest, audited.key.public)
    assert report.verified, [c.line() for c in report.checks]
    # One entry for the subtree: the verifier recomputes the cascade down the tree.
    assert {e["task_id"] for e in honest["entries"] if e["kind"] == "revoked"} == {lead.id}

    forge_allowed_call(audited, "rev")
    bundle = audited.firm.export_audit(audited.root.id)
    report = verify_bundle(bundle, audited.key.public)
    assert report.check("integrity").verdict == "PASS"
    assert report.check("monotonicity").verdict == "PASS"
    # The reviewer has no `revoked` entry of its own: the cascade is recomputed from the tree.
    containment = report.check("containment")
    assert containment.verdict == "FAIL" and f"its ancestor {lead.id}" in containment.detail


def test_a_call_claiming_an_old_check_after_its_task_ended_fails_containment(
    audited: Audited,
) -> None:
    forge_allowed_call(audited, "rev", checked_seq=1)  # "the check ran long ago"
    report = verify_bundle(audited.firm.export_audit(audited.root.id), audited.key.public)
    assert report.check("integrity").verdict == "PASS"
    containment = report.check("containment")
    assert containment.verdict == "FAIL" and "after the task ended" in containment.detail


def test_a_subtree_exports_and_verifies_on_its_own(audited: Audited) -> None:
    lead = audited.task("lead")
    bundle = audited.firm.export_audit(lead.id)
    assert bundle["task"] == lead.id and bundle["run"] == audited.root.id
    assert bundle["entries"][0]["kind"] == "created"
    report = verify_bundle(bundle, audited.key.public)
    assert report.verified, [c.line() for c in report.checks]
    # The root's own calls are not part of this tree: withheld, though still chained.
    root_call = next(
        e for e in bundle["entries"] if e["kind"] == "tool_call" and e["agent"] == "ceo"
    )
    assert "data" not in root_call and len(root_call["data_digest"]) == 64


def test_other_runs_in_the_span_are_withheld_and_the_bundle_still_verifies(
    tmp_path: Path,
) -> None:
    a = write_company(tmp_path / "a", AUDIT_CO)
    b = write_company(
        tmp_path / "b",
        """\
        company: Other Co
        tool_modules: [crm_tools.py]
        agents:
          - {id: solo, name: So, title: Analyst, tools: ["crm.*"]}
        """,
    )
    b_worked = threading.Event()
    scripts = audit_scripts()
    steps = scripts["rev"]

    def rev(session: Session) -> None:
        assert b_worked.wait(30)  # run B works while run A is open
        for tool, args in steps:
            brain.call(session, tool, args)

    def solo(session: Session) -> None:
        brain.call(session, "crm.query", {"segment": "secret", "rows": 1})
        # The call's result is owed to the log until the session's next write (its settle, or
        # the brain's next step): written here, as before a model call, so B's `tool_call` is
        # in the log before A's reviewer goes on. Without it, a settle delayed on a loaded
        # machine landed after A's end, outside A's bundle.
        session.check_cancelled()
        b_worked.set()

    scripts.update(rev=rev, solo=solo)
    brain = ScriptedBrain(scripts)
    with open_firm(tmp_path, brain) as firm:
        ra = firm.submit(a.org_path, "Check Q3", workspace=tmp_path / "ws")
        rb = firm.submit(b.org_path, "Secret project", workspace=tmp_path / "ws")
        firm.run_until(ra.id, timeout=60)
        firm.run_until(rb.id, timeout=60)
        bundle = firm.export_audit(ra.id)
        key = firm.audit_key()
    withheld = [e for e in bundle["entries"] if "data" not in e]
    assert any(e["task_id"] == rb.id and e["kind"] == "tool_call" for e in withheld)
    assert "secret" not in json.dumps([e for e in bundle["entries"] if e["task_id"] == rb.id])
    report = verify_bundle(bundle, key.public)
    assert report.verified, [c.line() for c in report.checks]


def test_the_head_is_signed_when_a_run_ends(audited: Audited) -> None:
    events = audited.firm.events(limit=10_000)
    (checkpoint,) = [e for e in events if e.kind == "checkpoint" and "ended" in e.data["reason"]]
    assert checkpoint.task_id == audited.root.id
    signed = checkpoint.data
    assert signed["public_key"] == audited.key.public_text
    assert signature_valid(audited.key.public, signed["seq"], signed["hash"], signed["signature"])
    by_seq = {e.seq: e for e in events}
    assert by_seq[signed["seq"]].hash == signed["hash"]
    assert by_seq[signed["seq"]].kind == "completed"  # the root's end, just before it
    # Exporting records a checkpoint too, over the bundle's last entry.
    exports = [e for e in events if e.kind == "checkpoint" and e.data["reason"] == "export"]
    assert [e.data["seq"] for e in exports] == [audited.bundle["head"]["seq"]]


def test_the_key_pair_lives_beside_the_database_and_is_private(audited: Audited) -> None:
    folder = audited.folder / "state"
    private = folder / PRIVATE_NAME
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    assert (folder / "audit_ed25519.pub").read_text().strip() == audited.key.public_text
    again = load_or_create_key(folder)
    assert again.public_text == audited.key.public_text


def test_the_audit_commands(audited: Audited, tmp_path: Path) -> None:
    db = str(audited.folder / "state" / "firm.db")
    pub = firm_cli("audit", "pubkey", "--db", db, cwd=tmp_path, check=True)
    assert pub.stdout.strip() == audited.key.public_text
    (tmp_path / "company.pub").write_text(pub.stdout)
    exported = firm_cli(
        "audit", "export", audited.root.id, "-o", "bundle.json", "--db", db, cwd=tmp_path
    )
    assert exported.returncode == 0, exported.stderr
    assert "bundle.json" in exported.stderr
    ok = firm_cli("audit", "verify", "bundle.json", "--pubkey", "company.pub", cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    lines = ok.stdout.splitlines()
    assert [line.split()[:2] for line in lines[:4]] == [
        ["integrity", "PASS"],
        ["monotonicity", "PASS"],
        ["containment", "PASS"],
        ["approvals", "PASS"],
    ]
    assert lines[-1].startswith("VERIFIED")
    # The key given inline works too; no key at all does not verify.
    inline = firm_cli(
        "audit", "verify", "bundle.json", "--pubkey", audited.key.public_text, cwd=tmp_path
    )
    assert inline.returncode == 0
    nokey = firm_cli("audit", "verify", "bundle.json", cwd=tmp_path)
    assert nokey.returncode == 1 and nokey.stdout.splitlines()[-1] == "NOT VERIFIED"
    # --json says the same, with the same exit codes.
    as_json = firm_cli(
        "audit", "verify", "bundle.json", "--pubkey", "company.pub", "--json", cwd=tmp_path
    )
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["verdict"] == "verified" and data["open_at"] is None
    assert [(c["name"], c["verdict"]) for c in data["checks"]] == [
        ("integrity", "PASS"),
        ("monotonicity", "PASS"),
        ("containment", "PASS"),
        ("approvals", "PASS"),
    ]
    nokey_json = firm_cli("audit", "verify", "bundle.json", "--json", cwd=tmp_path)
    assert nokey_json.returncode == 1
    assert json.loads(nokey_json.stdout)["verdict"] == "failed"
    # A tampered bundle exits 1 naming the check.
    bundle = json.loads((tmp_path / "bundle.json").read_text())
    entry(bundle, "tool_denied", "rev")["data"]["code"] = "fine"
    (tmp_path / "tampered.json").write_text(json.dumps(bundle))
    bad = firm_cli("audit", "verify", "tampered.json", "--pubkey", "company.pub", cwd=tmp_path)
    assert bad.returncode == 1 and bad.stdout.startswith("integrity     FAIL")
    # Mistakes are one clear line.
    garbage = firm_cli("audit", "verify", "bundle.json", "--pubkey", "nonsense", cwd=tmp_path)
    assert garbage.returncode == 2 and "not an Ed25519 public key" in garbage.stderr
    missing = firm_cli("audit", "export", "T-00000000", "--db", db, cwd=tmp_path)
    assert missing.returncode == 2 and "no task with id" in missing.stderr


def test_a_private_key_others_can_read_is_refused(audited: Audited, tmp_path: Path) -> None:
    private = audited.folder / "state" / PRIVATE_NAME
    os.chmod(private, 0o644)
    db = str(audited.folder / "state" / "firm.db")
    out = firm_cli("audit", "pubkey", "--db", db, cwd=tmp_path)
    assert out.returncode == 2 and "chmod 600" in out.stderr


def test_calls_of_a_session_cut_off_by_a_cancel_are_logged_and_the_bundle_verifies(
    tmp_path: Path,
) -> None:
    """A session that finished its work while its task was being cancelled: the settle is
    refused, but the calls it made are in the log (marked superseded) and the honest bundle
    still verifies."""
    import threading

    from tests.authority.scripted import ScriptedBrain, open_firm, write_company

    org = "company: Cut Co\nagents:\n  - {id: ceo, name: Ava, title: CEO}\n"
    company = write_company(tmp_path / "co", org)
    release = threading.Event()
    called = threading.Event()

    def ceo(session: Session) -> None:
        session.call("files.write", {"path": "draft.md", "content": "half a plan"})
        session.call("complete_task", {"result": "a plan", "files": ["draft.md"]})
        called.set()
        assert release.wait(30)  # the cancel lands here, after the calls, before the settle

    with open_firm(tmp_path, ScriptedBrain({"ceo": ceo})) as firm:
        root = firm.submit(company.org_path, "Plan", workspace=company.folder / "ws")
        firm.engine.start()
        assert called.wait(30)
        firm.store.cancel(root.id, "changed our minds")  # as `firm cancel` from elsewhere
        release.set()
        firm.run_until_idle(timeout=30)
        events = firm.events(0, 1000)
        kinds = [(e.kind, e.data.get("tool"), e.data.get("superseded")) for e in events]
        # Both results were still owed to the log (they ride the session's next write, here
        # the settle): written after the cancel, marked as from a superseded session.
        assert ("tool_started", "files.write", None) in kinds  # before its body, as always
        assert ("tool_call", "files.write", True) in kinds
        assert ("tool_call", "complete_task", True) in kinds
        assert firm.task(root.id).status == "cancelled"
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
        assert report.verified, [c.line() for c in report.checks]


def test_an_allowed_call_after_expiry_fails_containment(tmp_path: Path) -> None:
    import threading

    from tests.authority.scripted import ScriptedBrain, open_firm, write_company

    org = "company: Brief Co\nagents:\n  - {id: ceo, name: Ava, title: CEO}\n"
    company = write_company(tmp_path / "co", org)
    go_on = threading.Event()
    started = threading.Event()

    def ceo(session: Session) -> None:
        session.call("files.write", {"path": "a.md", "content": "in time"})
        started.set()
        assert go_on.wait(30)
        session.call("fail_task", {"reason": "out of time"})  # giving up is always allowed

    with open_firm(tmp_path, ScriptedBrain({"ceo": ceo})) as firm:
        root = firm.submit(
            company.org_path, "Quick", workspace=company.folder / "ws", grant={"ttl": 0.3}
        )
        firm.engine.start()
        assert started.wait(30)
        time.sleep(0.5)  # past the run's expiry
        store = firm.store
        store.append_events([(  # what an engine that skipped the expiry check would log
            "tool_call", root.id, "ceo",
            {"tool": "files.write", "allowed": True, "ok": True, "args_digest": digest({}),
             "result_digest": digest(""), "summary": "", "checked_seq": store.last_seq(),
             "checked_at": round(time.time(), 6)},
        )])  # fmt: skip
        go_on.set()
        firm.run_until(root.id, timeout=30)
        report = verify_bundle(firm.export_audit(root.id), firm.audit_key().public)
    assert report.check("integrity").verdict == "PASS"
    containment = report.check("containment")
    assert containment.verdict == "FAIL" and "after its grant expired" in containment.detail


def test_threads_making_the_key_at_once_agree_on_one(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from firm.audit.keys import load_or_create_key

    with ThreadPoolExecutor(8) as pool:
        keys = list(pool.map(lambda _: load_or_create_key(tmp_path / "keys"), range(16)))
    assert len({k.public_text for k in keys}) == 1
    assert not [p for p in (tmp_path / "keys").iterdir() if p.name.endswith(".tmp")]


def test_an_engine_makes_the_key_as_it_starts_and_its_stop_leaves_it_whole(
    tmp_path: Path,
) -> None:
    # Made as the engine starts (off the path of a run's end), and a stop right away waits
    # for it: no half-made key is left, and none is written after the stop.
    from firm.api import Firm

    state = tmp_path / "state"
    with Firm(state / "firm.db") as firm:
        firm.engine.start()
    names = sorted(p.name for p in state.iterdir())
    assert {PRIVATE_NAME, "audit_ed25519.pub"} <= set(names)
    assert not [n for n in names if n.endswith(".tmp")]
    assert (
        load_or_create_key(state).public_text == (state / "audit_ed25519.pub").read_text().strip()
    )
