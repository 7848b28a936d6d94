"""Cost where people look: a scripted llm run in an office whose chart prices its model. The
runs API and the org chart carry usage and cost per run and per desk; the page shows calls,
tokens and the estimate on the desks, in the drawer and in the run picker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from office_kit import TOKEN, Running

from firm.pricing import format_cost
from firm.server import AccessPolicy, Office, OfficeServer
from firm.testing import MODEL_NAME, ModelServer, ScriptedModel

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

INPUT, OUTPUT = 3.0, 15.0  # USD per million tokens
CHART = f"""\
company: Priced Co
llm:
  prices:
    {MODEL_NAME}: {{input: {INPUT}, output: {OUTPUT}}}
    another-model: {{input: 1, output: 2, cached_input: 0.5}}
agents:
  - {{id: ceo, name: Ava Stone, title: Chief Executive Officer}}
  - {{id: dev, name: Dan Reed, title: Engineer, reports_to: ceo}}
  - {{id: ops, name: Olga Ruiz, title: Operator, reports_to: ceo}}
"""


def cost_of(prompt: int, completion: int) -> float:
    return (prompt * INPUT + completion * OUTPUT) / 1_000_000


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, ModelServer]]:
    folder = tmp_path_factory.mktemp("priced")
    (folder / "company.yaml").write_text(CHART, encoding="utf-8")
    with ModelServer(ScriptedModel()) as model:
        office = Office(
            folder / "company.yaml",
            db=folder / "firm.db",
            brain="llm",
            brain_options=model.brain_options(),
            workspace=folder / "workspace",
            policy=AccessPolicy(token=TOKEN, reads_need_token=False),
            heartbeat=0.2,
        )
        server = OfficeServer(office, "127.0.0.1", 0).start()
        yield Running(office, server, folder), model
        server.stop()


def usage_by_agent(detail: dict[str, Any]) -> dict[str, tuple[int, int, int]]:
    out: dict[str, tuple[int, int, int]] = {}
    for t in [detail, *detail["subtree"]]:
        u = t["usage"]
        c, p, o = out.get(t["assignee"], (0, 0, 0))
        out[t["assignee"]] = (c + u["calls"], p + u["prompt_tokens"], o + u["completion_tokens"])
    return out


def test_the_api_carries_prices_usage_and_cost_per_run_and_desk(
    priced: tuple[Running, ModelServer],
) -> None:
    office, _ = priced
    run = office.submit("Ship the first release")
    detail = office.finish(run["id"])
    assert detail["status"] == "done"
    spent = usage_by_agent(detail)
    assert set(spent) == {"ceo", "dev", "ops"} and all(c > 0 for c, _, _ in spent.values())

    with office.client(token=None) as c:
        org = c.get("/api/org").json()
        runs = c.get("/api/runs").json()["runs"]
    assert org["prices"][MODEL_NAME] == {"input": INPUT, "output": OUTPUT, "cached_input": None}
    assert org["prices"]["another-model"]["cached_input"] == 0.5
    assert {a["id"]: a["model"] for a in org["agents"]} == dict.fromkeys(spent, MODEL_NAME)

    mine = next(r for r in runs if r["id"] == run["id"])
    assert mine["calls"] == sum(c for c, _, _ in spent.values())
    for agent, (calls, prompt, completion) in spent.items():
        desk = mine["agents"][agent]
        assert (desk["calls"], desk["prompt_tokens"], desk["completion_tokens"]) == (
            calls,
            prompt,
            completion,
        )
        assert desk["cost"] == pytest.approx(cost_of(prompt, completion))
    assert mine["cost"] == pytest.approx(cost_of(mine["prompt_tokens"], mine["completion_tokens"]))


def test_a_run_with_an_unpriced_model_has_no_total(tmp_path: Path) -> None:
    (tmp_path / "company.yaml").write_text(
        CHART.replace(f"    {MODEL_NAME}:", "    unused-model:"), encoding="utf-8"
    )
    with ModelServer(ScriptedModel()) as model:
        office = Office(
            tmp_path / "company.yaml",
            db=tmp_path / "firm.db",
            brain="llm",
            brain_options=model.brain_options(),
            workspace=tmp_path / "workspace",
            policy=AccessPolicy(token=TOKEN, reads_need_token=False),
            heartbeat=0.2,
        )
        server = OfficeServer(office, "127.0.0.1", 0).start()
        try:
            running = Running(office, server, tmp_path)
            run = running.submit("Ship it", to="dev")
            running.finish(run["id"])
            with running.client(token=None) as c:
                mine = c.get("/api/runs").json()["runs"][0]
        finally:
            server.stop()
    assert mine["calls"] > 0
    assert mine["cost"] is None and mine["agents"]["dev"]["cost"] is None


def test_desks_drawer_and_picker_show_calls_tokens_and_cost(
    browser, priced: tuple[Running, ModelServer]
) -> None:
    office, _ = priced
    errors: list[str] = []
    page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(office.url + f"/#token={TOKEN}")
    expect(page.locator(".desk")).to_have_count(3)
    expect(page.locator("#conn")).to_have_text("live")

    # Watched live: the usage arrives with each model_call event.
    run = office.submit("Write the handbook")
    detail = office.finish(run["id"])
    spent = usage_by_agent(detail)
    for agent, (calls, prompt, completion) in spent.items():
        usage = page.locator(f'.desk[data-agent="{agent}"] .desk-usage')
        expect(usage).to_contain_text(f"{calls} call{'s' if calls > 1 else ''}")
        expect(usage).to_contain_text(format_cost(cost_of(prompt, completion)))

    # A reload starts from the snapshot's usage and shows the same.
    page.reload()
    calls, prompt, completion = spent["dev"]
    expect(page.locator('.desk[data-agent="dev"] .desk-usage')).to_contain_text(
        format_cost(cost_of(prompt, completion))
    )

    page.locator('.desk[data-agent="ceo"] .desk-task').click()
    drawer = page.locator("#drawer")
    expect(drawer).to_be_visible()
    total_p = sum(p for _, p, _ in spent.values())
    total_c = sum(o for _, _, o in spent.values())
    expect(drawer.locator(".facts")).to_contain_text("With the tasks below")
    expect(drawer.locator(".facts")).to_contain_text(format_cost(cost_of(total_p, total_c)))

    option = page.locator(f'#run-pick option[value="{run["id"]}"]')
    expect(option).to_contain_text(format_cost(cost_of(total_p, total_c)))
    assert not errors, errors
