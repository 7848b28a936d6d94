"""A bundle cut back to an earlier signed point proves a prefix, never the whole record
(issue 11, item 5)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from firm.audit.keys import public_text
from firm.audit.verify import verify_bundle
from firm.cli.audit import EXIT_PARTIAL
from firm.cli.main import app
from tests.audit.conftest import Audited
from tests.support.cli import firm_cli


def cut_back(bundle: dict[str, Any], audited: Audited) -> tuple[dict[str, Any], int]:
    """The bundle as someone would cut it: entries up to an earlier point the company signed
    (here the entry before the root's completion), with that signature as its head."""
    out = copy.deepcopy(bundle)
    root = bundle["task"]
    (done,) = [e for e in out["entries"] if e["kind"] == "completed" and e["task_id"] == root]
    keep = [e for e in out["entries"] if e["seq"] < done["seq"]]
    last = keep[-1]
    out["entries"] = keep
    out["head"] = {
        "seq": last["seq"],
        "hash": last["hash"],
        "signature": audited.key.sign_head(last["seq"], last["hash"]),
        "public_key": out["head"]["public_key"],
    }
    return out, last["seq"]


def test_a_whole_bundle_is_complete(audited: Audited) -> None:
    report = verify_bundle(audited.bundle, audited.key.public)
    assert report.verified and not report.partial and report.open_at is None


def test_a_bundle_cut_at_a_signed_point_verifies_only_as_partial(audited: Audited) -> None:
    cut, seq = cut_back(audited.bundle, audited)
    report = verify_bundle(cut, audited.key.public)
    assert report.holds  # what it shows is genuine …
    assert not report.verified and report.partial  # … but it is not the whole record
    assert report.open_at == seq
    assert f"the tree was still open at seq {seq}" in report.partial_line()


def test_firm_audit_verify_says_partial_with_its_own_exit_status(
    audited: Audited, tmp_path: Path
) -> None:
    cut, seq = cut_back(audited.bundle, audited)
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(cut))
    result = CliRunner().invoke(
        app, ["audit", "verify", str(path), "--pubkey", public_text(audited.key.public)]
    )
    assert result.exit_code == EXIT_PARTIAL, result.output
    assert f"PARTIAL: the tree was still open at seq {seq}" in result.output
    assert "VERIFIED" not in result.output.replace("NOT VERIFIED", "")


def test_a_run_whose_end_checkpoint_was_lost_gets_it_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from firm.audit.checkpoint import Checkpointer, entry_at
    from tests.audit.conftest import AUDIT_CO, audit_scripts
    from tests.authority.scripted import ScriptedBrain, open_firm, run_company, write_company

    company = write_company(tmp_path / "co", AUDIT_CO)
    # The process dies between the root's ending and the signature over it.
    monkeypatch.setattr(Checkpointer, "after_ended", lambda self, tasks: None)
    with open_firm(tmp_path, ScriptedBrain(audit_scripts())) as firm:
        root = run_company(firm, company)
        store = firm.store
        last = entry_at(store, store.last_seq())
        assert root.status == "done" and last.kind != "checkpoint"
    monkeypatch.undo()
    with open_firm(tmp_path, ScriptedBrain({})) as firm:
        firm.engine.start()
        store = firm.store
        signed = entry_at(store, store.last_seq())
        assert signed.kind == "checkpoint" and signed.task_id == root.id
        assert signed.data["seq"] == last.seq and "signed on resume" in signed.data["reason"]


def test_verify_refuses_a_bundle_over_the_size_cap_before_reading_it(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as f:  # sparse: 3 MB on paper, nothing read if the cap holds
        f.truncate(3_000_000)
    result = firm_cli("audit", "verify", str(big), "--max-mb", "2", cwd=tmp_path)
    assert result.returncode != 0
    assert "3 MB, larger than --max-mb 2: not read" in result.stderr


def test_verify_refuses_deeply_nested_json_with_a_clear_error(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    result = firm_cli("audit", "verify", str(deep), cwd=tmp_path)
    assert result.returncode != 0
    assert "not a bundle (JSON nested too deeply)" in result.stderr
    assert "Traceback" not in result.stderr
