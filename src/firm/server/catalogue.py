"""The event catalogue for the office page: static/catalogue.js, generated from firm.events.

The page has no build step, so the catalogue ships as a small ES module the other modules
import. Regenerate it after changing firm/events.py:

    python -m firm.server.catalogue

A test fails while the file in the package differs from what this module renders.
"""

from __future__ import annotations

import json
from pathlib import Path

from firm.events import catalogue_data

PATH = Path(__file__).parent / "static" / "catalogue.js"

HEADER = """\
// The event catalogue: every kind of event in the log, the task status it leads to, the
// schema of its data, and the task state machine. Generated from firm/events.py by
// `python -m firm.server.catalogue`; do not edit by hand (a test checks it is current).
"""


def render() -> str:
    data = catalogue_data()
    # One line per kind and per status: a change to the catalogue is a readable diff.
    kinds = ",\n".join(f"  {_js(k)}: {_js(v)}" for k, v in data["kinds"].items())
    statuses = ",\n".join(f"  {_js(k)}: {_js(v)}" for k, v in data["statuses"].items())
    return (
        HEADER
        + "\nexport const CATALOGUE = Object.freeze({\n"
        + f" kinds: {{\n{kinds},\n }},\n statuses: {{\n{statuses},\n }},\n}});\n\n"
        + '/** Every kind by its name: KIND.CREATED === "created". */\n'
        + "export const KIND = Object.freeze(\n"
        + "  Object.fromEntries(Object.entries(CATALOGUE.kinds).map(([k, v]) => [v.name, k])),\n"
        + ");\n"
    )


def _js(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def main() -> None:
    text = render()
    if not PATH.exists() or PATH.read_text(encoding="utf-8") != text:
        PATH.write_text(text, encoding="utf-8")
        print(f"wrote {PATH}")
    else:
        print(f"{PATH} is current")


if __name__ == "__main__":
    main()
