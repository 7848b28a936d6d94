"""The API docs page (/docs) in headless Chromium: on loopback it shows the API at once; off
loopback the schema needs the token, so the page takes it from the address or the office page,
or asks for it, and then calls the API with it."""

from __future__ import annotations

import pytest
from browser_kit import ARTIFACTS
from office_kit import TOKEN, Running

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect


@pytest.fixture
def public(fresh_office) -> Running:  # type: ignore[no-untyped-def]
    """An office that behaves as if bound beyond loopback: every read needs the token."""
    return fresh_office(reads_need_token=True)


def open_docs(browser, address: str, errors: list[str]):  # type: ignore[no-untyped-def]
    page = browser.new_context().new_page()
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.goto(address)
    return page


def operation(page, path: str):  # type: ignore[no-untyped-def]
    return page.locator(f'.opblock-summary-path[data-path="{path}"]')


def test_on_loopback_the_docs_show_the_api_at_once(browser, office: Running) -> None:
    errors: list[str] = []
    page = open_docs(browser, f"{office.url}/docs", errors)
    expect(operation(page, "/api/tasks").first).to_be_visible()
    expect(page.locator("#token-form")).to_be_hidden()
    expect(page).to_have_title("firm office · Acme AI · API")
    assert errors == []


def test_off_loopback_the_docs_use_the_token_from_the_address(browser, public: Running) -> None:
    errors: list[str] = []
    page = open_docs(browser, f"{public.url}/docs#token={TOKEN}", errors)
    expect(operation(page, "/api/org")).to_be_visible()
    assert "token" not in page.url  # taken out of the address bar
    # Calls made from the docs carry the token: try GET /api/org.
    block = page.locator(".opblock", has=operation(page, "/api/org"))
    block.locator(".opblock-summary").click()
    block.locator(".try-out__btn").click()
    block.locator(".execute").click()
    answer = block.locator(".live-responses-table tbody tr").first
    expect(answer.locator(".response-col_status")).to_have_text("200")
    expect(answer.locator(".microlight").first).to_contain_text("Acme AI")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "docs-page.png"))
    assert errors == []


def test_off_loopback_the_docs_ask_for_the_token(browser, public: Running) -> None:
    errors: list[str] = []
    page = open_docs(browser, f"{public.url}/docs", errors)
    form = page.locator("#token-form")
    expect(form).to_be_visible()
    expect(page.locator("#token-reason")).to_contain_text("access token")
    expect(operation(page, "/api/tasks")).to_have_count(0)
    assert "Acme AI" not in page.content()

    page.locator("#token-input").fill("not-the-token")
    page.locator("#token-input").press("Enter")
    expect(page.locator("#token-reason")).to_contain_text("wrong")

    page.locator("#token-input").fill(TOKEN)
    page.locator("#token-input").press("Enter")
    expect(operation(page, "/api/tasks").first).to_be_visible()
    expect(form).to_be_hidden()
    # Kept for this browser, as the office page keeps it: the next visit needs no typing.
    page.goto(f"{public.url}/docs")
    expect(operation(page, "/api/tasks").first).to_be_visible()
    assert errors == []
