"""The docs name every event kind the catalogue has, and no other."""

from __future__ import annotations

import re
from pathlib import Path

from firm.events import EventKind

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_office_docs_list_every_event_kind() -> None:
    text = (DOCS / "office.md").read_text(encoding="utf-8")
    table = text[text.index("| kind | what happened") : text.index("Kinds may be added")]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    named = {k for row in rows for k in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert named == {k.value for k in EventKind}
