"""The "how to add a brain / a tool source" examples in docs/architecture.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def _examples() -> list[tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    found = []
    for section in ("How to add a brain", "How to add a tool source"):
        body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
        blocks = re.findall(r"```python\n(.*?)```", body, re.S)
        assert blocks, f"no example under {section!r}"
        found += [(section, b) for b in blocks]
    return found


@pytest.mark.parametrize(("section", "code"), _examples(), ids=lambda v: str(v)[:24])
def test_the_example_runs(section: str, code: str) -> None:
    exec(compile(code, f"{DOC}:{section}", "exec"), {"__name__": "doc_example"})
