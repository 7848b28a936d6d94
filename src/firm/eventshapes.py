"""An entry's data checked against the catalogue once per shape, not once per entry.

Every kind's data is a strict TypedDict (firm.events): no coercion, extra keys refused. For the
kinds whose fields are all plain types — str, int, float, bool, None, unions of those, lists
and str-keyed dicts of them, Any — whether data fits depends on its keys and on the exact type
of each value alone, never on a value: no enum, no literal, no pattern. So data of a shape
(its keys in order, each value's type, nested lists and dicts spelled out) that pydantic has
accepted once is accepted again, and the store's append asks pydantic only for shapes it has
not seen (a handful per kind in a process: the engine builds its entries from fixed code).
Validating a small entry cost ~5 µs against ~1 µs for its shape, and every entry the store
appends passes here. Kinds with any other field are validated every time, as before.
"""

from __future__ import annotations

import types
from typing import Any, NotRequired, Required, Union, get_args, get_origin, get_type_hints

from typing_extensions import is_typeddict

from firm.events import CATALOGUE, EventKind, validate

Shape = tuple[Any, ...]

# An int outside 64 bits gives no shape: data holding one is validated every time.
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_SCALARS = frozenset((str, float, bool, type(None)))
# Shapes remembered per process: far more than a process's writers produce; past it, the
# shapes not seen yet are validated every time.
SHAPES_MAX = 4096
_accepted: dict[tuple[str, Shape], EventKind] = {}


def shape(value: dict[str, Any]) -> Shape | None:
    """The data's shape, or None unless it is plain JSON (exact str, int, float, bool, None,
    lists, dicts with text keys, all the way down): data that reads back from its canonical
    text as itself, type for type (an int outside 64 bits does too, but has no shape)."""
    out: list[Any] = [dict]
    for key, item in value.items():
        if type(key) is not str:
            return None
        of = _of(item)
        if of is None:
            return None
        out.append(key)
        out.append(of)
    return tuple(out)


def _of(item: Any) -> Any:
    """A value's part of a shape: its type, or a nested list's or dict's shape; None if it
    has none (an int past 64 bits, a type JSON has not)."""
    kind = type(item)
    if kind in _SCALARS:
        return kind
    if kind is int:
        return int if _INT_MIN <= item <= _INT_MAX else None
    if kind is dict:
        return shape(item)
    if kind is not list:
        return None
    out: list[Any] = [list]
    for element in item:
        of = _of(element)
        if of is None:
            return None
        out.append(of)
    return tuple(out)


def validate_shaped(kind: str, data: dict[str, Any], data_shape: Shape) -> EventKind:
    """events.validate for plain data of this shape: pydantic's answer for the first data of
    each shape of a kind its types decide, remembered."""
    known = _accepted.get((kind, data_shape))
    if known is not None:
        return known
    checked = validate(kind, data)  # InvalidEvent: nothing is remembered
    if _by_types(checked) and len(_accepted) < SHAPES_MAX:
        _accepted[(kind, data_shape)] = checked
    return checked


_decided: dict[EventKind, bool] = {}


def _by_types(kind: EventKind) -> bool:
    """Whether the kind's fields are all of types whose every value the schema accepts."""
    found = _decided.get(kind)
    if found is None:
        found = _decided[kind] = _plain_type(CATALOGUE[kind].data)
    return found


def _plain_type(tp: Any) -> bool:
    if tp in (str, int, float, bool, type(None), Any):
        return True
    if is_typeddict(tp):
        hints = get_type_hints(tp, include_extras=True)
        return all(_plain_type(h) for h in hints.values())
    origin = get_origin(tp)
    args = get_args(tp)
    if origin in (NotRequired, Required):
        return _plain_type(args[0])
    if origin in (Union, types.UnionType):
        return all(_plain_type(a) for a in args)
    if origin is list:
        return len(args) == 1 and _plain_type(args[0])
    if origin is dict:
        return len(args) == 2 and args[0] is str and _plain_type(args[1])
    return False  # an enum, a literal, anything else: its values matter
