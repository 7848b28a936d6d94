"""Live-only text: what an agent is writing at this moment, for whoever watches this process.

The activity log keeps an agent's thoughts in paragraphs (signed, replayable); between two
paragraphs a model writes token by token, and a person watching a desk wants to see that too.
A session publishes the paragraph it is writing so far; an office in the same process listens
and passes it to its pages. Nothing is kept and nothing is signed: with no listener (a `firm
run` in a terminal, a worker process), publishing costs a dictionary lookup.

Listeners are per store, so two offices in one process (tests do this) each hear only the
sessions working their own store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

# agent id, task id, the paragraph so far ("" once it is in the log)
Listener = Callable[[str, str, str], None]

_lock = threading.Lock()
_listeners: dict[int, tuple[Listener, ...]] = {}


def listen(store: object, listener: Listener) -> Callable[[], None]:
    """Hear what the sessions working on `store` write; returns a function to stop."""
    key = id(store)
    with _lock:
        _listeners[key] = (*_listeners.get(key, ()), listener)

    def stop() -> None:
        with _lock:
            left = tuple(fn for fn in _listeners.get(key, ()) if fn is not listener)
            if left:
                _listeners[key] = left
            else:
                _listeners.pop(key, None)

    return stop


def publish(store: object, agent: str, task_id: str, text: str) -> None:
    """Tell the listeners of `store` what `agent` has written so far on `task_id`."""
    listeners = _listeners.get(id(store))
    if not listeners:
        return
    for listener in listeners:
        listener(agent, task_id, text)
