"""A connection's before_ and after_cursor_execute listeners, found in SQLAlchemy's dispatch
so that store/prepared.py can call them around each statement it runs on the driver's cursor
(the benchmarks count statements with one; tests pause a transaction at a chosen statement
with the other)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from sqlalchemy import Connection
from sqlalchemy.event import attr as event_attr

Listener = Callable[..., None]
Listeners = tuple[Listener | None, Listener | None]


def cursor_listeners(conn: Connection) -> Listeners:
    """The connection's before_ and after_cursor_execute listeners, None where it has none.
    Not looked for at all while neither the connection nor its engine has any listener (the
    flags SQLAlchemy's own execute checks first)."""
    if not (conn._has_events or conn.engine._has_events):
        return None, None
    dispatch = conn.dispatch
    return _one(dispatch.before_cursor_execute), _one(dispatch.after_cursor_execute)


def _one(listeners: Any) -> Listener | None:
    """The event's one listener itself, where it has one (a benchmark's statement count, a
    test's pause): SQLAlchemy's dispatch calls it through a frame that walks the engine's and
    the connection's lists, as much again as the listener. None where it has none; the
    dispatch itself where it has several, which calls them in their order."""
    if type(listeners) is _JOINED:
        # A connection's and its engine's, where neither has one (the store's engine has
        # only connect and begin listeners): said without the lists _flat builds, as the
        # store's reads and writes ask a few times a task (~0.2 µs a time).
        local = listeners.local
        parent = getattr(listeners.parent_dispatch, listeners.name)
        if (
            type(local) is _EMPTY
            and type(parent) is _EMPTY
            and not local.parent_listeners
            and not parent.parent_listeners
        ):
            return None
    fns = _flat(listeners)
    if not fns:
        return None
    if len(fns) == 1:
        return cast(Listener, fns[0])
    return cast(Listener, listeners)


# SQLAlchemy's private listener collections, looked up rather than imported: should a release
# rename one, _flat iterates that kind as SQLAlchemy does instead of the store failing to load.
_JOINED = getattr(event_attr, "_JoinedListener", None)
_COLLECTION = getattr(event_attr, "_ListenerCollection", None)
_EMPTY = getattr(event_attr, "_EmptyListener", None)


def _flat(listeners: Any) -> list[Listener]:
    """The functions an event's listener collection calls, in its order. The store's engine
    always has listeners (connect, begin), so every transaction (and every read outside one)
    looks here: iterating SQLAlchemy's collections runs their Python __iter__ and __len__ at
    each level (a connection's joined to its engine's), about a third of a BEGIN's cost; their
    lists are read here directly, as those methods read them. Any other kind is iterated."""
    kind = type(listeners)
    if kind is _JOINED:  # the connection's own, then its engine's (`listeners`)
        return [
            *_flat(listeners.local),
            *_flat(getattr(listeners.parent_dispatch, listeners.name)),
        ]
    if kind is _COLLECTION:
        return [*listeners.parent_listeners, *listeners.listeners]
    if kind is _EMPTY:
        return [*listeners.parent_listeners]
    return list(listeners)
