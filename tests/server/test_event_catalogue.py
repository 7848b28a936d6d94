"""The page reads event kinds from the engine's catalogue: static/catalogue.js is generated
from firm/events.py and current, no other module spells a kind, and the browser sees the
same kinds and groups as the engine."""

from __future__ import annotations

import re
from typing import Any

from tests.server.office_kit import Running

from firm.events import ENDINGS, EventKind
from firm.server.catalogue import PATH, render
from firm.tasks import Status

STATIC = PATH.parent
STATUSES = {s.value for s in Status}
# How a module would spell a kind: a case of a switch on it, a comparison with it, or a list
# of quoted names holding one that is an event kind and not also a task status.
_CASE = re.compile(r"""case\s+["'](\w+)["']\s*:""")
_COMPARED = re.compile(r"""kind\s*[!=]==?\s*["'](\w+)["']|["'](\w+)["']\s*[!=]==?\s*\w+\.kind""")
_LISTED = re.compile(r"""\[\s*((?:["']\w+["']\s*,?\s*)+)\]""")
_QUOTED = re.compile(r"""["'](\w+)["']""")


def test_the_page_copy_of_the_catalogue_is_current() -> None:
    assert PATH.read_text(encoding="utf-8") == render(), (
        "static/catalogue.js is stale: run `python -m firm.server.catalogue`"
    )


def _spelled_kinds(source: str) -> set[str]:
    kinds = {k.value for k in EventKind}
    found = set(_CASE.findall(source))
    found |= {a or b for a, b in _COMPARED.findall(source)}
    for listed in _LISTED.findall(source):
        found |= {q for q in _QUOTED.findall(listed) if q not in STATUSES}
    return found & kinds


def test_no_module_of_the_page_spells_an_event_kind() -> None:
    spelled = {
        path.name: sorted(_spelled_kinds(path.read_text(encoding="utf-8")))
        for path in sorted(STATIC.glob("*.js"))
        if path != PATH
    }
    assert {name: kinds for name, kinds in spelled.items() if kinds} == {}
    # ...and the scan would see one.
    assert _spelled_kinds('switch (e.kind) { case "woken": }') == {"woken"}
    assert _spelled_kinds('if (e.kind === "failed") x();') == {"failed"}
    assert _spelled_kinds('new Set(["completed"])') == {"completed"}
    assert _spelled_kinds('task.status === "failed"; tone = "thought"') == set()


def test_the_browser_reads_the_engines_kinds(office: Running, browser: Any) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(office.url + "/")
    seen = page.evaluate(
        """async () => {
            const m = await import("/kinds.js");
            return { kind: m.KIND, endings: [...m.ENDINGS].sort(), goal: [...m.GOAL_KINDS].sort() };
        }"""
    )
    page.close()
    assert errors == []
    assert seen["kind"] == {k.name: k.value for k in EventKind}
    assert seen["endings"] == sorted(ENDINGS)
    assert seen["goal"] == sorted({EventKind.CREATED, *ENDINGS})
