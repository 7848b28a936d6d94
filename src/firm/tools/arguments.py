"""Tool arguments made canonical before anything judges, logs or runs them.

Arguments come from a model (or from text injected into its prompt), from a delegator, from a
brain: hostile input. Before the authority check sees them, they become one plain JSON object
— str keys; str, finite numbers, bools, None, lists and objects as values — that the audit log
can hash and store exactly. Anything else is refused with a ToolError that says what is wrong
and where, so the model can send it again correctly; nothing the log cannot record ever
reaches a tool body.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from firm.errors import ToolError

MAX_BYTES = 8 * 1024 * 1024  # above the workspace's write cap: file content fits, more does not
MAX_DEPTH = 64
MAX_INT = 2**63 - 1  # what every store column, the page and other JSON readers carry exactly


def canonical_arguments(tool: str, raw: Any) -> dict[str, Any]:
    """The arguments as one canonical JSON object, or a ToolError naming the first problem.
    `raw` is a model's JSON text or a mapping a brain built."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str | bytes):
        raw = _parse(tool, raw)
    elif isinstance(raw, Mapping) and not isinstance(raw, dict):
        raw = dict(raw)
    if not isinstance(raw, dict):
        raise ToolError(
            f"{tool}: arguments must be a JSON object, not {_json_type(raw)}; send one JSON object"
        )
    value, bound = _canonical(tool, raw)
    # The exact size needs the whole object encoded; below the bound's limit it cannot be over.
    if bound > MAX_BYTES and (size := _size(value)) > MAX_BYTES:
        raise ToolError(
            f"{tool}: the arguments are {size} bytes, over the limit of {MAX_BYTES} bytes; "
            "send less (write long content to a file in parts)"
        )
    return value


def _size(value: dict[str, Any]) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


# An upper bound of one item's share of the encoded size, beyond its text: a key's quotes and
# colon, the comma, a string's quotes or a container's brackets, or a number (at most 24
# characters: -1.7976931348623157e+308), or true/false/null. Each character of a key or a
# string is at most 6 bytes (an escape like \u001f; UTF-8 takes at most 4).
_ITEM_BYTES = 32
_CHAR_BYTES = 6


def _parse(tool: str, raw: str | bytes) -> Any:
    if len(raw) > MAX_BYTES:
        raise ToolError(
            f"{tool}: the arguments are {len(raw)} bytes, over the limit of {MAX_BYTES} bytes; "
            "send less (write long content to a file in parts)"
        )
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolError(f"{tool}: arguments are not UTF-8 ({exc.reason})") from None
    depth = _text_depth(raw)
    if depth > MAX_DEPTH:
        raise ToolError(f"{tool}: arguments are nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(raw, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except _Refused as exc:
        raise ToolError(f"{tool}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ToolError(
            f"{tool}: arguments are not valid JSON ({exc.msg} at position {exc.pos}); "
            "send one JSON object"
        ) from None
    except (ValueError, RecursionError) as exc:  # an integer of thousands of digits
        raise ToolError(
            f"{tool}: arguments cannot be read: an integer is too large ({exc})"
        ) from None


class _Refused(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a finite number; JSON numbers must be finite")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"the key {_shown(key)} appears twice in one object")
        out[key] = value
    return out


def _text_depth(raw: str) -> int:
    """The deepest bracket nesting of JSON text, outside strings: measured before parsing, so
    a deeply nested text is refused without recursing into it."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in raw:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def _canonical(tool: str, top: dict[Any, Any]) -> tuple[dict[str, Any], int]:
    """A checked copy — tuples become lists, everything else is checked as it is — and an
    upper bound of its size as compact JSON. Iterative, so no input can exhaust the stack."""
    root: dict[str, Any] = {}
    bound = 2
    # (source, destination, path, depth)
    stack: list[tuple[Any, Any, str, int]] = [(top, root, "", 1)]
    while stack:
        source, dest, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ToolError(f"{tool}: arguments are nested deeper than {MAX_DEPTH} levels")
        keyed = isinstance(source, dict)
        for key, value in source.items() if keyed else enumerate(source):
            if keyed:
                if not isinstance(key, str):
                    raise ToolError(
                        f"{tool}: object keys must be strings; {_where(path)} has the key "
                        f"{key!r} ({type(key).__name__})"
                    )
                if not key.isascii():  # ASCII is always text: only the rest is encoded
                    _check_text(tool, key, path, what="a key")
                bound += _CHAR_BYTES * len(key)
            # Most arguments are plain strings: checked here, and the path that names one in
            # an error is spelled only when there is an error to name it in.
            if type(value) is str:
                if not value.isascii():
                    _check_text(tool, value, _here(path, key, keyed), what="argument")
                bound += _ITEM_BYTES + _CHAR_BYTES * len(value)
                dest[key] = value
                continue
            here = _here(path, key, keyed)
            leaf = _leaf(tool, value, here)
            bound += _ITEM_BYTES + (_CHAR_BYTES * len(value) if isinstance(value, str) else 0)
            if isinstance(value, dict):
                leaf = {}
                stack.append((value, leaf, here, depth + 1))
            elif isinstance(value, list | tuple):
                leaf = [None] * len(value)
                stack.append((value, leaf, here, depth + 1))
            dest[key] = leaf
    return root, bound


def _here(path: str, key: Any, keyed: bool) -> str:
    if not keyed:
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _leaf(tool: str, value: Any, here: str) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -MAX_INT - 1 <= value <= MAX_INT:
            raise ToolError(
                f"{tool}: argument {_shown(here)} is an integer outside the 64-bit range; "
                "send a smaller number (or the number as a string)"
            )
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ToolError(
                f"{tool}: argument {_shown(here)} is {value}, not a finite number; "
                "JSON numbers must be finite"
            )
        return value
    if isinstance(value, str):
        _check_text(tool, value, here, what="argument")
        return value
    if isinstance(value, dict | list | tuple):
        return None  # filled in by the caller's walk
    raise ToolError(
        f"{tool}: argument {_shown(here)} is not a JSON value (a {type(value).__name__}); "
        "send a string, number, boolean, null, list or object"
    )


def _check_text(tool: str, text: str, here: str, *, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = f"argument {_shown(here)}" if what == "argument" else f"a key in {_where(here)}"
        raise ToolError(
            f"{tool}: {where} holds a lone surrogate (U+{ord(text[exc.start]):04X} at "
            f"character {exc.start}), which is not text; send valid Unicode"
        ) from None


def _where(path: str) -> str:
    return f"argument {_shown(path)}" if path else "the arguments"


def _shown(name: str) -> str:
    """A name as it can be shown back: printable, bounded, no lone surrogates."""
    safe = name.encode("utf-8", "backslashreplace").decode("utf-8")
    return repr(safe if len(safe) <= 80 else safe[:80] + "…")


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", int: "a number", float: "a number"}
    names[bool] = "a boolean"
    return names.get(type(value), "null" if value is None else f"a {type(value).__name__}")
