"""The rows a prebuilt statement returns on SQLite's cursor (store/prepared.py): tuples that
answer by position, by column name and through _mapping, like SQLAlchemy's, with a class per
statement's columns made once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class Row(tuple):  # type: ignore[type-arg]
    """A result row: by position, and by column name through _mapping, like SQLAlchemy's."""

    __slots__ = ()
    keys: tuple[str, ...] = ()
    _fields: tuple[str, ...] = ()  # as SQLAlchemy's rows name them

    @property
    def _mapping(self) -> dict[str, Any]:
        return dict(zip(self.keys, self, strict=True))

    def __getattr__(self, name: str) -> Any:
        try:
            return self[self.keys.index(name)]
        except ValueError:
            raise AttributeError(name) from None


class Rows:
    """The few parts of SQLAlchemy's Result the store uses."""

    def __init__(self, rows: list[Any], rowcount: int):
        self._rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows)

    def all(self) -> list[Row]:
        return self._rows

    def first(self) -> Row | None:
        return self._rows[0] if self._rows else None

    def one(self) -> Row:
        if len(self._rows) != 1:
            raise LookupError(f"expected one row, got {len(self._rows)}")
        return self._rows[0]

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None

    def scalar_one(self) -> Any:
        return self.one()[0]

    def scalars(self) -> list[Any]:
        return [r[0] for r in self._rows]


_row_classes: dict[tuple[str, ...], type[Row]] = {}


def row_class(keys: tuple[str, ...]) -> type[Row]:
    """The Row class for a statement's columns, made once per set of names."""
    cls = _row_classes.get(keys)
    if cls is None:
        cls = type("Row", (Row,), {"__slots__": (), "keys": keys, "_fields": keys})
        _row_classes[keys] = cls
    return cls
