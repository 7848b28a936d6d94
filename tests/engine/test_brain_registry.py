"""Brains are declared once; the CLI's flags, the API and resume all come from the declaration."""

from __future__ import annotations

from pathlib import Path

import pytest

from firm.api import Firm
from firm.brains import BrainOption, BrainSpec, brain_spec, options_for, register_brain
from firm.errors import FirmError
from firm.org import parse_org
from tests.support import firm_cli

ORG = "company: Solo\nagents:\n  - {id: ceo, name: Ada, title: CEO}\n"


def test_run_help_lists_each_brain_with_its_own_options(tmp_path: Path) -> None:
    out = firm_cli("run", "--help", cwd=tmp_path, check=True).stdout
    sim = out.split("Options of the simulation brain:", 1)[1]
    assert "--sim-latency" in sim.split("Options of the", 1)[0]
    llm = out.split("Options of the llm and crewai brains:", 1)[1]
    assert all(flag in llm for flag in ("--model", "--temperature", "--max-iterations"))
    general = out.split("Options of the", 1)[0]
    assert "--sim-latency" not in general and "--model" not in general
    assert "--brain" in general and "simulation, llm, crewai" in general
    assert "team" not in general.split("--brain", 1)[1].split("--db", 1)[0]  # not a choice
    for command in ("submit", "serve"):  # the same declaration serves them
        help_text = firm_cli(command, "--help", cwd=tmp_path, check=True).stdout
        assert "Options of the simulation brain:" in help_text and "--max-iterations" in help_text


def test_flags_are_checked_against_the_brain_they_belong_to() -> None:
    assert options_for("simulation", {"sim_latency": 0.5, "model": None}) == {"latency": 0.5}
    with pytest.raises(FirmError, match="--model, --temperature and --max-iterations apply to"):
        options_for("simulation", {"temperature": 0.2})
    with pytest.raises(FirmError, match="apply to --brain simulation"):
        options_for("llm", {"seed": 3})
    with pytest.raises(FirmError, match="unknown brain 'oracle'"):
        options_for("oracle", {})


def test_a_brain_whose_extra_is_missing_names_the_extra(tmp_path: Path) -> None:
    register_brain(
        BrainSpec(
            "test-missing",
            "firm_test_no_such_module:Brain",
            help="Needs a library that is not installed.",
            options=(BrainOption("missing_knob", "--missing-knob", int, 0, "A knob."),),
            extra="nothere",
            needs="firm_test_no_such_module",
        )
    )
    assert not brain_spec("test-missing").installed
    org = parse_org(ORG, "<test>")
    with (
        Firm(tmp_path / "firm.db") as firm,
        pytest.raises(FirmError, match=r"pip install 'firm\[nothere\]'"),
    ):
        firm.submit(org, "Work", brain="test-missing", workspace=tmp_path / "ws")
    with Firm(tmp_path / "firm.db") as firm:
        assert firm.store.open_run_ids() == []  # nothing was stored


def test_firm_run_refuses_an_unknown_brain_with_the_known_ones(tmp_path: Path) -> None:
    (tmp_path / "co.yaml").write_text(ORG)
    proc = firm_cli("run", "co.yaml", "Work", "--brain", "oracle", cwd=tmp_path)
    assert proc.returncode == 2
    assert "unknown brain 'oracle' (one of: simulation, llm, crewai" in proc.stderr
