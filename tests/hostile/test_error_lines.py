"""An error about a huge chart stays one readable line (issue 11, item 6)."""

from __future__ import annotations

import pytest

from firm.errors import OrgChartError
from firm.org import parse_org


def test_the_known_agents_in_an_error_are_cut_to_a_few_and_a_count() -> None:
    agents = "".join(f"  - {{id: a{i}, name: A, title: Engineer}}\n" for i in range(2_000))
    text = f"company: Big\nagents:\n{agents}  - {{id: x, name: X, title: E, reports_to: nobody}}\n"
    with pytest.raises(OrgChartError) as err:
        parse_org(text, "big.yaml")
    message = str(err.value)
    assert "'nobody' names no agent (known: a0, a1," in message
    assert "… and 1,981 more)" in message
    assert len(message) < 1000
