"""The chart's `llm.prices`: parsed into per-model prices, every mistake with its file, line and
field, and estimates that never call an unpriced model free."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firm import Firm
from firm.errors import OrgChartError
from firm.org import load_org
from firm.pricing import estimate, format_cost
from firm.testing import MODEL_NAME, ModelServer, ScriptedModel
from tests.support import firm_cli

AGENTS = "agents:\n  - {id: ceo, name: Ava, title: CEO}\n"


def load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "company.yaml"
    path.write_text(text, encoding="utf-8")
    return load_org(path)


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(OrgChartError) as info:
        load(tmp_path, text)
    return [str(p) for p in info.value.problems]


def test_prices_parse_per_model(tmp_path: Path) -> None:
    org = load(
        tmp_path,
        "company: A\n"
        "llm:\n"
        "  model: gpt-4o-mini\n"
        "  prices:\n"
        "    gpt-4o-mini: {input: 0.15, output: 0.6, cached_input: 0.075}\n"
        "    gpt-4o: {input: 2.5, output: 10}\n" + AGENTS,
    )
    assert org.llm is not None and org.llm.prices is not None
    mini, big = org.llm.prices["gpt-4o-mini"], org.llm.prices["gpt-4o"]
    assert (mini.input, mini.output, mini.cached_input) == (0.15, 0.6, 0.075)
    assert (big.input, big.output, big.cached_input) == (2.5, 10.0, None)
    # An agent inherits the company's llm block with its prices; they never reach a request.
    assert org.llm_for("ceo").prices == org.llm.prices


def test_estimates_price_input_output_and_cached_input(tmp_path: Path) -> None:
    org = load(
        tmp_path,
        "company: A\nllm:\n  prices:\n    m: {input: 1, output: 4, cached_input: 0.5}\n"
        "    plain: {input: 2, output: 8}\n" + AGENTS,
    )
    prices = org.llm.prices  # type: ignore[union-attr]
    assert estimate(prices, "m", 1_000_000, 250_000) == pytest.approx(2.0)
    # Half the prompt read from the cache: half of it at the cached price.
    assert estimate(prices, "m", 1_000_000, 0, cached_tokens=500_000) == pytest.approx(0.75)
    # Without a cached price, cached tokens cost what input costs.
    assert estimate(prices, "plain", 1_000_000, 0, cached_tokens=500_000) == pytest.approx(2.0)
    assert estimate(prices, "unknown-model", 10, 10) is None
    assert estimate(None, "m", 10, 10) is None
    assert estimate(prices, "m", 0, 0) == 0
    assert format_cost(0.00123) == "$0.0012" and format_cost(2.5) == "$2.50"


@pytest.mark.parametrize(
    ("snippet", "line", "field", "message"),
    [
        ("    m: {input: -1, output: 1}\n", 4, "llm.prices.m.input", "greater than or equal to 0"),
        ("    m: {input: 1}\n", 4, "llm.prices.m.output", "is required"),
        ("    m: {input: 1, output: lots}\n", 4, "llm.prices.m.output", "valid number"),
        ("    m: {input: 1, output: 2, cache: 1}\n", 4, "llm.prices.m.cache", "unknown key"),
        ("    m: {input: .nan, output: 2}\n", 4, "llm.prices.m.input", "finite number"),
        ("    m: {input: 1, output: 20000}\n", 4, "llm.prices.m.output", "less than or equal"),
        ("    m: 0.15\n", 4, "llm.prices.m", "valid dictionary"),
    ],
)
def test_bad_prices_name_file_line_and_field(
    tmp_path: Path, snippet: str, line: int, field: str, message: str
) -> None:
    found = problems(tmp_path, "company: A\nllm:\n  prices:\n" + snippet + AGENTS)
    assert len(found) == 1, found
    assert f"company.yaml:{line}: {field}: " in found[0] and message in found[0], found[0]


def test_prices_belong_to_the_company_not_an_agent(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        "company: A\nagents:\n  - id: ceo\n    name: Ava\n    title: CEO\n"
        "    llm:\n      prices:\n        m: {input: 1, output: 2}\n",
    )
    assert len(found) == 1, found
    assert "company.yaml:6: agents[0].llm: prices belong in the company's llm block" in found[0]


def test_firm_show_prices_a_run_at_its_own_charts_prices(tmp_path: Path) -> None:
    chart = tmp_path / "company.yaml"
    chart.write_text(
        f"company: A\nllm:\n  prices:\n    {MODEL_NAME}: {{input: 3, output: 15}}\n"
        "agents:\n  - {id: ceo, name: Ava, title: CEO}\n"
        "  - {id: dev, name: Dan, title: Engineer, reports_to: ceo}\n",
        encoding="utf-8",
    )
    with ModelServer(ScriptedModel()) as server, Firm(tmp_path / "firm.db") as firm:
        root = firm.run(
            load_org(chart),
            "Ship it",
            brain="llm",
            brain_options=server.brain_options(),
            workspace=tmp_path / "ws",
            timeout=60,
        )
        tasks = firm.subtree(root.id)
    prompt = sum(t.usage["prompt_tokens"] for t in tasks)
    completion = sum(t.usage["completion_tokens"] for t in tasks)
    expected = (prompt * 3 + completion * 15) / 1_000_000
    db = str(tmp_path / "firm.db")
    shown = firm_cli("show", root.id, "--db", db, "--json", cwd=tmp_path, check=True)
    assert json.loads(shown.stdout)["tree_cost"] == pytest.approx(expected)
    text = firm_cli("show", root.id, "--db", db, cwd=tmp_path, check=True).stdout
    assert f"about {format_cost(expected)} at the chart's prices" in " ".join(text.split())
