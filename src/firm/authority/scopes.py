"""Tool scopes: dotted names and globs (`files.read`, `crm.*`, `*`). Pure functions."""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase


def allows(patterns: Iterable[str], tool_name: str) -> bool:
    return any(fnmatchcase(tool_name, p) for p in patterns)
