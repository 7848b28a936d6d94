"""Shared fixtures: stores on both backends (tests/support/stores.py), org charts from text."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from firm.org import OrgChart, parse_org

# One definition of each shared fixture, for every directory (tests/support/).
pytest_plugins = ["tests.support.stores", "tests.support.models"]

THREE_LEVELS = """\
company: Test Co
max_concurrent: 4
agents:
  - {id: ceo, name: Ava, title: Chief Executive Officer}
  - {id: cto, name: Ben, title: Chief Technology Officer, reports_to: ceo}
  - {id: cmo, name: Cleo, title: Chief Marketing Officer, reports_to: ceo}
  - {id: gabriel, name: Gabriel, title: Backend Engineer, reports_to: cto}
  - {id: hana, name: Hana, title: Frontend Engineer, reports_to: cto}
  - {id: maya, name: Maya, title: Content Marketer, reports_to: cmo}
  - {id: omar, name: Omar, title: Growth Marketer, reports_to: cmo}
"""


@pytest.fixture
def org_factory(tmp_path: Path) -> Callable[[str], OrgChart]:
    def make(text: str, name: str = "company.yaml") -> OrgChart:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return parse_org(path.read_text(encoding="utf-8"), str(path))

    return make


@pytest.fixture
def three_levels(org_factory: Callable[[str], OrgChart]) -> OrgChart:
    return org_factory(THREE_LEVELS)
