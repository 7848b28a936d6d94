"""YAML for files a person writes (org charts, team files): plain data, no aliases.

An alias (`*name`) makes the loader share or repeat a node, and nested aliases multiply: a
500-byte file can stand for gigabytes, and an alias inside its own anchor (`l: &l [*l]`) is a
cycle every walk of the data recurses into forever. Charts and team files never need them, so
they are refused, with the line, before anything is built — the event stream is read first,
which does not expand anything.
"""

from __future__ import annotations

import yaml

# libyaml when it is there: the same results, an order of magnitude faster on big charts.
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class AliasRefused(yaml.YAMLError):
    """The text uses a YAML alias; `line` is where (1-based)."""

    def __init__(self, line: int, name: str) -> None:
        super().__init__(f"line {line}: YAML aliases (*{name}) are not allowed here")
        self.line = line
        self.problem = (
            f"the alias *{name} is not allowed: aliases can expand without bound, "
            "so write the value out"
        )
        self.problem_mark = _Mark(line - 1)


class _Mark:
    def __init__(self, line: int) -> None:
        self.line = line


def refuse_aliases(text: str) -> None:
    """Raise AliasRefused at the first alias in `text` (or yaml's own error for bad YAML)."""
    for event in yaml.parse(text, Loader=Loader):
        if isinstance(event, yaml.AliasEvent):
            raise AliasRefused(event.start_mark.line + 1, str(event.anchor))


def load_plain(text: str) -> tuple[object, yaml.Node | None]:
    """The data and the node tree of `text`, refusing aliases first. Raises yaml.YAMLError."""
    refuse_aliases(text)
    return yaml.load(text, Loader=Loader), yaml.compose(text, Loader=Loader)
