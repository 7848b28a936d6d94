"""The fenced code blocks of the Markdown files: where each is and how to treat it.

A block is run, parsed or shown according to its fence's language. A block that is deliberately
not run says so in an HTML comment on the line before it: ``<!-- not-run: why -->``. A fence with
no language is an error: the reader cannot tell a command from its output, and neither can we.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RUN = {"sh", "bash", "shell", "python", "py"}
PARSE = {"yaml", "yml", "json"}
SHOWN = {"text", "console", "output"}

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)(?P<info>.*)$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    body: str
    not_run: str | None  # the reason given in <!-- not-run: … -->, if any

    @property
    def where(self) -> str:
        try:
            name = self.path.relative_to(ROOT)
        except ValueError:
            name = self.path
        return f"{name}:{self.line}"

    @property
    def kind(self) -> str:
        lang = self.lang.lower()
        if lang in {"sh", "bash", "shell"}:
            return "sh"
        if lang in {"python", "py"}:
            return "python"
        if lang in {"yaml", "yml"}:
            return "yaml"
        return lang


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m["fence"], len(m["indent"])
        lang = m["info"].strip().split(" ")[0] if m["info"].strip() else ""
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        reason = None
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0 and (nm := _NOT_RUN.match(lines[j])):
            reason = nm["reason"] or "(no reason given)"
        found.append(Block(path, start + 1, lang, "\n".join(body) + "\n", reason))
        i += 1
    return found
