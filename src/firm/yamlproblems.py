"""Where in a YAML file a problem is: the line of every path, keys given twice, and pydantic's
validation errors turned into Problems that name the file, the line and the field.

Shared by every file a person writes (org charts, team files), so each reports its mistakes
the same way, all at once.
"""

from __future__ import annotations

from collections.abc import Iterator

import yaml
from pydantic import ValidationError

from firm.errors import Problem

YamlPath = tuple[str | int, ...]


def line_map(root: yaml.Node | None) -> dict[YamlPath, int]:
    """Map each path in the YAML document to the 1-based line where it appears."""
    lines: dict[YamlPath, int] = {}

    def walk(node: yaml.Node, path: YamlPath) -> None:
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                k = key.value if isinstance(key, yaml.ScalarNode) else str(key.value)
                lines[(*path, k)] = key.start_mark.line + 1
                walk(value, (*path, k))
                # Keep the key's line for the path: "field: value" is reported where the key is.
                lines[(*path, k)] = key.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*path, i))

    if root is not None:
        walk(root, ())
    return lines


def duplicate_keys(root: yaml.Node | None, file: str) -> list[Problem]:
    """PyYAML silently keeps the last of two equal keys; a chart with one is almost surely wrong."""
    problems: list[Problem] = []

    def walk(node: yaml.Node, path: str) -> None:
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                k = str(key.value)
                if k in seen:
                    problems.append(
                        Problem(
                            file,
                            key.start_mark.line + 1,
                            f"{path}{k}".lstrip("."),
                            f"key {k!r} appears twice in the same mapping",
                        )
                    )
                seen.add(k)
                walk(value, f"{path}{k}.")
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, f"{path.rstrip('.')}[{i}].")

    if root is not None:
        walk(root, "")
    return problems


def field_name(loc: YamlPath) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def nearest_line(lines: dict[YamlPath, int], loc: YamlPath) -> int | None:
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


def pydantic_problems(
    err: ValidationError, file: str, lines: dict[YamlPath, int]
) -> Iterator[Problem]:
    for e in err.errors():
        # Drop pydantic's internal loc parts (e.g. function-after markers) that aren't YAML paths.
        loc: YamlPath = tuple(
            p for p in e["loc"] if isinstance(p, int) or not str(p).startswith("function-")
        )
        message = e["msg"]
        if e["type"] == "extra_forbidden":
            message = f"unknown key {loc[-1]!r}"
        elif e["type"] == "missing":
            message = "is required"
        elif message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        yield Problem(file, nearest_line(lines, loc), field_name(loc), message)
