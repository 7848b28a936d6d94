"""Making activity data recordable: what the log stores must be text and numbers that canonical
JSON can hash and every store can hold. Pure functions.

Tool arguments are refused when they are not (firm.tools.arguments); what the engine writes
about a call — a tool's answer, a model's thought, an error message, a name the model made up
— is kept, with what cannot be recorded spelled out instead: a lone surrogate becomes its
escape (``\\ud800``), a number that is not finite becomes its name, and text is bounded.
"""

from __future__ import annotations

import math
from typing import Any

MAX_DEPTH = 32


def text(value: str, limit: int | None = None) -> str:
    """The string with lone surrogates escaped, cut to `limit` characters (with an ellipsis)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    if limit is not None and len(value) > limit:
        value = value[:limit] + " …"
    return value


def data(value: Any, _depth: int = 0) -> Any:
    """A copy of a JSON-like value that canonical JSON can always encode."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        # str() of an integer of thousands of digits raises; its size is what matters here
        return value if abs(value) < 2**63 else f"an integer of {value.bit_length()} bits"
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return text(value)
    if _depth >= MAX_DEPTH:
        return "…"
    if isinstance(value, dict):
        return {text(str(k)): data(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [data(v, _depth + 1) for v in value]
    return text(str(value), 500)
