"""YAML aliases are refused in org charts, team files and bundles' charts (issue 11, item 4):
a few hundred bytes must not stand for gigabytes, nor an alias for a cycle."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from firm.audit.verify import verify_bundle
from firm.errors import OrgChartError
from firm.org import parse_org
from firm.teams.files import TeamFileError, load_team
from tests.audit.conftest import Audited

# Nine levels of nine: 9**9 (387 million) strings once expanded, in 520 bytes.
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [*{a}, *{a}, *{a}, *{a}, *{a}, *{a}, *{a}, *{a}, *{a}]\n"
    for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)
CHART = "company: Acme\nagents:\n  - {id: ceo, name: Ava, title: CEO}\n"


def test_an_alias_bomb_in_an_org_chart_is_refused_with_its_line() -> None:
    with pytest.raises(OrgChartError) as err:
        parse_org(CHART + BOMB, "co.yaml")
    assert "co.yaml:5:" in str(err.value)
    assert "alias *a is not allowed" in str(err.value)


def test_a_self_referencing_alias_is_refused_not_a_recursion_error() -> None:
    with pytest.raises(OrgChartError) as err:
        parse_org(CHART + "loop: &l [*l]\n", "co.yaml")
    assert "co.yaml:4:" in str(err.value) and "alias *l" in str(err.value)


def test_an_anchor_alone_is_harmless_and_an_alias_in_the_agents_is_refused() -> None:
    text = "company: Acme\nagents:\n  - &boss {id: ceo, name: Ava, title: CEO}\n  - *boss\n"
    with pytest.raises(OrgChartError, match="alias"):
        parse_org(text)


def test_an_alias_in_a_team_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text("agents:\n  writer: &w {role: Writer, goal: write}\n  editor: *w\n")
    with pytest.raises(TeamFileError) as err:
        load_team(path)
    assert f"{path}:3:" in str(err.value) and "alias *w" in str(err.value)


def test_a_bundle_that_does_not_verify_has_its_chart_left_unread(audited: Audited) -> None:
    bad = copy.deepcopy(audited.bundle)
    bad["entries"][1]["ts"] += 1
    bad["org"]["yaml"] = CHART + BOMB
    result = verify_bundle(bad, audited.key.public).check("integrity")
    assert result.verdict == "FAIL"
    assert "org chart is not read" in result.detail


def test_a_signed_bundle_with_an_alias_bomb_chart_fails_without_expanding_it(
    audited: Audited,
) -> None:
    bad = copy.deepcopy(audited.bundle)
    bad["org"]["yaml"] = CHART + BOMB
    result = verify_bundle(bad, audited.key.public).check("integrity")
    assert result.verdict == "FAIL" and "org chart" in result.detail
