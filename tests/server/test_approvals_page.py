"""People in the chain of command, in the office page (headless Chromium): a desk waiting for a
person wears a badge, the approvals inbox counts what waits (live, up and down), the drawer and
the inbox show a call's arguments in full and approve or deny it; the approved body runs, the
denial's reason reaches the model; a tab with a stale token watches and is asked for the token
only to decide; a call decided elsewhere first shows the decision that stands."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser_kit import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, WEBGL_ARGS

from firm.server import AccessPolicy, Office, OfficeServer
from firm.testing import ModelRequest, ModelServer, ScriptedModel, call, calls, complete

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

TOKEN = "office-token-for-approvals"
ALICE = "alice-token-0123"
BOB = "bob-token-4567"

TOOLS = '''
import firm

LEDGER = {ledger!r}


@firm.tool("payments.transfer")
def transfer(to: str, amount: int, memo: str = "") -> str:
    """Send money."""
    with open(LEDGER, "a", encoding="utf-8") as f:
        f.write(f"{{to}} {{amount}}\\n")
    return f"sent {{amount}} to {{to}}"
'''

ORG = """\
company: Pay Co
tool_modules: [pay_tools.py]
approvals:
  - {tools: ["payments.transfer"], timeout: 2h}
agents:
  - {id: ceo, name: Ada, title: CEO, tools: ["payments.*", "files.*"]}
  - {id: cfo, name: Cam, title: CFO, reports_to: ceo, tools: ["payments.*"]}
"""

# What a model may send: markup, a right-to-left override, a value far wider than a phone.
# The machine may be loaded many times over: waits on the server get room (a guard against
# hangs, not a timing claim).
SLOW = 60_000

HOSTILE_TO = "<img src=x onerror=alert(1)>acme\u202e001"
LONG_MEMO = "INVOICE-" + "7" * 3000


@dataclass
class PayOffice:
    office: Office
    server: OfficeServer
    ledger: Path
    model: ScriptedModel
    briefs: list[str]

    @property
    def url(self) -> str:
        return self.server.url

    def client(self, token: str = TOKEN) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    def submit(self, goal: str) -> str:
        with self.client() as c:
            r = c.post("/api/tasks", json={"goal": goal})
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    def pending(self, count: int, timeout: float = 60) -> list[dict[str, Any]]:
        """Wait (a guard against hangs, not a timing claim) until `count` calls wait."""
        deadline = time.monotonic() + timeout
        while True:
            with self.client() as c:
                items = c.get("/api/approvals").json()
            if len(items) == count:
                return list(items)
            assert time.monotonic() < deadline, f"expected {count} waiting calls, saw {items}"
            time.sleep(0.05)

    def finished(self, root: str) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while True:
            with self.client() as c:
                task = c.get(f"/api/tasks/{root}").json()
            if task["status"] in ("done", "failed", "cancelled"):
                return dict(task)
            assert time.monotonic() < deadline, task
            time.sleep(0.05)

    def transfers(self) -> list[str]:
        return self.ledger.read_text().splitlines() if self.ledger.exists() else []


def script(model: ScriptedModel, briefs: list[str]) -> None:
    """The CFO asks to pay (hostile arguments); once a person decided, it reports what it was
    told. The CEO is the autopilot: it hands the goal to the CFO and merges the result."""

    def ask(req: ModelRequest):  # type: ignore[no-untyped-def]
        return calls(call("payments_transfer", to=HOSTILE_TO, amount=100, memo=LONG_MEMO))

    def report(req: ModelRequest):  # type: ignore[no-untyped-def]
        briefs.append(req.brief)
        return calls(complete("told: " + req.brief.splitlines()[-2][:300]))

    model.when(agent="cfo", match=lambda r: "waited for a person" not in r.brief).always(ask)
    model.when(agent="cfo", brief_contains="waited for a person").always(report)


@pytest.fixture
def pay(tmp_path: Path) -> Iterator[PayOffice]:
    folder = tmp_path / "pay"
    folder.mkdir()
    ledger = folder / "ledger.txt"
    (folder / "pay_tools.py").write_text(TOOLS.format(ledger=str(ledger)), encoding="utf-8")
    org = folder / "company.yaml"
    org.write_text(textwrap.dedent(ORG), encoding="utf-8")
    model = ScriptedModel()
    briefs: list[str] = []
    script(model, briefs)
    with ModelServer(model) as models:
        office = Office(
            org,
            db=folder / "firm.db",
            brain="llm",
            brain_options=models.brain_options(timeout=5.0),
            workspace=folder / "ws",
            policy=AccessPolicy(
                token=TOKEN,
                reads_need_token=False,
                people={ALICE: "alice", BOB: "bob"},
            ),
            heartbeat=0.1,
        )
        server = OfficeServer(office, "127.0.0.1", 0).start()
        yield PayOffice(office, server, ledger, model, briefs)
        server.stop()


@pytest.fixture(scope="module")
def gl_browser(browser: Any) -> Iterator[Any]:
    """Chromium drawing WebGL in software, for the 3D floor's badge (from the same Playwright
    as the plan's browser: one sync Playwright at a time)."""
    b = browser.browser_type.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS + WEBGL_ARGS)
    yield b
    b.close()


def open_page(browser: Any, pay: PayOffice, errors: list[str], token: str, **context: Any) -> Any:
    context.setdefault("viewport", {"width": 1440, "height": 900})
    page = browser.new_context(**context).new_page()
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(pay.url + f"/#token={token}")
    expect(page.locator("#conn")).to_have_text("live", timeout=SLOW)
    return page


def no_page_overflow(page: Any) -> None:
    """Nothing a model sent widens the page: long values scroll inside their box."""
    wide = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert wide <= 0, f"the page is {wide}px wider than the window"


def test_approve_from_the_drawer_runs_the_call(browser: Any, pay: PayOffice) -> None:
    errors: list[str] = []
    page = open_page(browser, pay, errors, ALICE)
    inbox = page.locator("#inbox-open")
    expect(inbox).to_have_attribute("data-count", "0", timeout=SLOW)

    root = pay.submit("Pay Acme's March invoice")
    (waiting,) = pay.pending(1)
    expect(inbox).to_have_attribute("data-count", "1", timeout=SLOW)
    expect(inbox).to_have_accessible_name("Approvals: 1 waiting for a person", timeout=SLOW)

    # The CFO's desk waits for a person (a badge); the CEO waits on a report: not the same.
    cfo = page.locator('.desk[data-agent="cfo"]')
    expect(cfo.locator(".ask-badge")).to_be_visible(timeout=SLOW)
    expect(cfo).to_have_attribute("data-person", "true", timeout=SLOW)
    expect(cfo.locator(".desk-state")).to_have_text("Waiting for a person", timeout=SLOW)
    ceo = page.locator('.desk[data-agent="ceo"]')
    expect(ceo.locator(".desk-state")).to_have_text("Waiting on 1 report", timeout=SLOW)
    expect(ceo.locator(".ask-badge")).to_be_hidden(timeout=SLOW)

    # The inbox lists it: who, which task, the tool, when it times out, the arguments.
    inbox.click()
    item = page.locator(f'.inbox-item[data-approval="{waiting["id"]}"]')
    expect(item).to_contain_text("Cam", timeout=SLOW)
    expect(item).to_contain_text("payments.transfer")
    expect(item).to_contain_text("unless someone decides")
    args = item.locator(".decision-args")
    expect(args).to_contain_text('"amount": 100', timeout=SLOW)
    expect(args).to_contain_text("<img src=x onerror=alert(1)>acme\\u202e001")
    expect(item.locator(".decision-hidden")).to_contain_text("1 invisible or direction-changing")
    assert page.locator(".inbox-item img").count() == 0  # text, never markup
    assert args.evaluate("el => el.scrollWidth > el.clientWidth")  # the memo scrolls
    no_page_overflow(page)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "approvals-inbox.png"))

    # From the inbox to the task's drawer; approve there with a note.
    item.locator(".inbox-task button").click()
    expect(page.locator("#inbox")).not_to_be_visible(timeout=SLOW)
    drawer = page.locator("#drawer")
    expect(page.locator("#drawer-title")).to_have_text(
        "CFO part: Pay Acme's March invoice", timeout=SLOW
    )
    card = drawer.locator(f'.decision[data-approval="{waiting["id"]}"]')
    expect(card.locator(".decision-args")).to_contain_text(LONG_MEMO[:40], timeout=SLOW)
    card.locator("textarea").fill("invoice checked against the PO")
    page.screenshot(path=str(ARTIFACTS / "approvals-drawer.png"))
    card.get_by_role("button", name="Approve").click()
    expect(card.locator(".decision-verdict")).to_contain_text("Approved by alice at", timeout=SLOW)
    expect(card).to_contain_text("invoice checked against the PO", timeout=SLOW)
    expect(inbox).to_have_attribute("data-count", "0", timeout=SLOW)

    # The body ran once, with the arguments shown; the agent was given its result.
    done = pay.finished(root)
    assert done["status"] == "done", done
    assert pay.transfers() == [f"{HOSTILE_TO} 100"]
    assert any("sent 100 to" in b for b in pay.briefs)
    expect(cfo.locator(".ask-badge")).to_be_hidden(timeout=SLOW)
    expect(card.locator(".decision-verdict")).to_contain_text("it ran", timeout=SLOW)
    assert errors == []


def test_deny_from_the_inbox_with_a_stale_token_at_a_phones_width(
    browser: Any, pay: PayOffice
) -> None:
    errors: list[str] = []
    page = open_page(
        browser,
        pay,
        errors,
        "token-from-before-a-restart",
        viewport={"width": 390, "height": 800},
        reduced_motion="reduce",
    )
    first = pay.submit("Pay Acme")
    pay.pending(1)
    second = pay.submit("Pay Acme again")
    a, b = pay.pending(2)
    inbox = page.locator("#inbox-open")
    expect(inbox).to_have_attribute("data-count", "2", timeout=SLOW)  # up, live
    expect(inbox).to_be_visible(timeout=SLOW)
    assert inbox.locator(".inbox-count").evaluate("el => getComputedStyle(el).animationName") == (
        "none"
    )
    expect(page.locator("#token-dialog")).not_to_be_visible()  # watching asks for nothing

    # By keyboard: open the inbox, deny the first call.
    inbox.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#inbox-title")).to_be_focused()
    card = page.locator(f'.inbox-item[data-approval="{a["id"]}"] .decision')
    expect(card.locator(".decision-args")).to_contain_text('"amount": 100', timeout=SLOW)
    no_page_overflow(page)
    card.locator("textarea").focus()
    page.keyboard.press("Tab")
    expect(card.get_by_role("button", name="Approve")).to_be_focused()
    page.keyboard.press("Tab")
    expect(card.get_by_role("button", name="Deny")).to_be_focused()
    page.keyboard.press("Enter")  # no reason yet: refused on the page, nothing sent
    expect(card.locator(".form-error")).to_contain_text("Say why")
    expect(card.locator("textarea")).to_be_focused()
    page.keyboard.type("Wrong account: pay the EUR one")
    card.get_by_role("button", name="Deny").focus()
    page.keyboard.press("Enter")

    # The stale token is refused; the page asks for the token, then the denial goes through.
    expect(page.locator("#token-dialog")).to_be_visible(timeout=SLOW)
    page.locator("#token-input").fill(BOB)
    page.locator("#token-input").press("Enter")
    expect(page.locator("#token-dialog")).to_be_hidden(timeout=SLOW)
    expect(card.locator(".decision-verdict")).to_contain_text("Denied by bob at", timeout=SLOW)
    expect(inbox).to_have_attribute("data-count", "1", timeout=SLOW)  # down, live
    page.screenshot(path=str(ARTIFACTS / "approvals-inbox-phone.png"))

    # Someone else approves the second one: the count follows, and the inbox shows who.
    with pay.client(ALICE) as c:
        assert c.post(f"/api/approvals/{b['id']}/approve", json={}).status_code == 200
    expect(inbox).to_have_attribute("data-count", "0", timeout=SLOW)
    other = page.locator(f'.inbox-item[data-approval="{b["id"]}"] .decision-verdict')
    expect(other).to_contain_text("Approved by alice", timeout=SLOW)

    assert pay.finished(first)["status"] == "done"
    assert pay.finished(second)["status"] == "done"
    assert pay.transfers() == [f"{HOSTILE_TO} 100"]  # only the approved one ran
    told = [x for x in pay.briefs if "denied by bob" in x]
    assert told and "Wrong account: pay the EUR one" in told[0]  # the reason reached the model
    # The refused decision (401) is the only error the browser logs.
    assert [e for e in errors if "401" not in e] == []


def test_a_call_decided_elsewhere_first_shows_the_decision_that_stands(
    browser: Any, pay: PayOffice
) -> None:
    errors: list[str] = []
    page = open_page(browser, pay, errors, ALICE)
    root = pay.submit("Pay Acme")
    (waiting,) = pay.pending(1)
    aid = waiting["id"]

    # Bob denies it while Alice's approval is on its way: the office answers 409.
    def bob_first(route: Any) -> None:
        with pay.client(BOB) as c:
            r = c.post(f"/api/approvals/{aid}/deny", json={"reason": "paid by cheque already"})
            assert r.status_code == 200, r.text
        route.continue_()

    page.route(f"**/api/approvals/{aid}/approve", bob_first)
    page.locator("#inbox-open").click()
    card = page.locator(f'.inbox-item[data-approval="{aid}"] .decision')
    expect(card.locator(".decision-args")).to_contain_text('"amount": 100', timeout=SLOW)
    card.get_by_role("button", name="Approve").click()
    expect(card.locator(".decision-verdict")).to_contain_text("Denied by bob", timeout=SLOW)
    expect(card).to_contain_text("paid by cheque already", timeout=SLOW)
    expect(card.locator(".form-error")).to_have_count(0)
    assert pay.finished(root)["status"] == "done"
    assert pay.transfers() == []
    assert [e for e in errors if "409" not in e] == []


def test_the_3d_floor_shows_the_badge(gl_browser: Any, pay: PayOffice) -> None:
    errors: list[str] = []
    page = open_page(gl_browser, pay, errors, ALICE)
    expect(page.locator("#floor-3d")).to_be_visible(timeout=SLOW)
    pay.submit("Pay Acme")
    pay.pending(1)
    desk = page.locator('.d3-desk[data-agent="cfo"]')
    expect(desk).to_have_attribute("data-state", "person", timeout=SLOW)
    expect(desk).to_contain_text("Waiting for a person", timeout=SLOW)
    badge = page.locator(".d3-ask:not([hidden])")
    expect(badge).to_have_count(1, timeout=SLOW)
    badge.click()
    expect(page.locator("#drawer-title")).to_have_text("CFO part: Pay Acme", timeout=SLOW)
    expect(page.locator("#drawer .decision .decision-args")).to_contain_text(
        '"amount": 100', timeout=SLOW
    )
    page.screenshot(path=str(ARTIFACTS / "approvals-3d.png"))
    assert errors == []


PLAN_ORG = """\
company: Plan Co
approvals:
  - {agents: [ceo], delegations: true, timeout: 1d}
agents:
  - {id: ceo, name: Ada, title: CEO}
  - {id: cto, name: Tom, title: CTO, reports_to: ceo}
  - {id: cfo, name: Cam, title: CFO, reports_to: ceo}
"""


@pytest.fixture
def plan_office(tmp_path: Path) -> Iterator[PayOffice]:
    """The CEO's delegations wait for a person, a turn at a time (the autopilot model)."""
    folder = tmp_path / "plan"
    folder.mkdir()
    org = folder / "company.yaml"
    org.write_text(PLAN_ORG, encoding="utf-8")
    model = ScriptedModel()
    with ModelServer(model) as models:
        office = Office(
            org,
            db=folder / "firm.db",
            brain="llm",
            brain_options=models.brain_options(timeout=5.0),
            workspace=folder / "ws",
            policy=AccessPolicy(token=TOKEN, reads_need_token=False, people={ALICE: "alice"}),
            heartbeat=0.1,
        )
        server = OfficeServer(office, "127.0.0.1", 0).start()
        yield PayOffice(office, server, folder / "none.txt", model, [])
        server.stop()


def test_a_plan_shows_its_delegations_in_the_inbox(browser: Any, plan_office: PayOffice) -> None:
    errors: list[str] = []
    page = open_page(browser, plan_office, errors, ALICE)
    root = plan_office.submit("Launch the product")
    (plan,) = plan_office.pending(1)
    assert plan["kind"] == "plan"
    inbox = page.locator("#inbox-open")
    expect(inbox).to_have_attribute("data-count", "1", timeout=SLOW)
    ceo = page.locator('.desk[data-agent="ceo"]')
    expect(ceo).to_have_attribute("data-person", "true", timeout=SLOW)

    inbox.click()
    card = page.locator(f'.inbox-item[data-approval="{plan["id"]}"] .decision')
    expect(card.locator(".decision-tool")).to_have_text("A plan of 2 delegations", timeout=SLOW)
    items = card.locator(".plan-item")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_contain_text("Tom")
    expect(items.nth(0)).to_contain_text("Launch the product")
    expect(items.nth(1)).to_contain_text("Cam")
    page.screenshot(path=str(ARTIFACTS / "approvals-plan.png"))
    card.get_by_role("button", name="Approve").click()
    expect(card.locator(".decision-verdict")).to_contain_text("Approved by alice", timeout=SLOW)
    expect(inbox).to_have_attribute("data-count", "0", timeout=SLOW)
    assert plan_office.finished(root)["status"] == "done"
    assert errors == []
