"""What an engine knows of its tasks' lineages: each delegating task's chain of ids and grant
expiries, so a subtask's first check need not read its ancestors back from the store.

Both halves of a chain are fixed once a task exists (a task's parent and grant never change),
and what can change — a revocation or cancel of an ancestor — is stamped on every row of the
subtree it ends, so a subtask's own row says it. A miss (the parent ran in another process, or
was dropped to bound the size) costs the read the cache saves.
"""

from __future__ import annotations

import threading
from itertools import islice

from firm.tasks import Task

# (task id, grant expiry or None), nearest first.
Chain = tuple[tuple[str, float | None], ...]

LIMIT = 10_000  # delegating tasks remembered; only managers are, so a run rarely fills it


class Lineages:
    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._chains: dict[str, Chain] = {}
        self._lock = threading.Lock()

    def ancestors(self, task: Task) -> Chain | None:
        """The task's ancestors, nearest first; None when this engine does not know them."""
        if task.parent_id is None:
            return ()
        return self._chains.get(task.parent_id)

    def remember(self, task_id: str, chain: Chain) -> None:
        """A delegating task's chain: itself first, then its ancestors."""
        if self._chains.get(task_id) == chain:
            return
        with self._lock:
            if len(self._chains) >= self._limit:
                # The oldest half goes (dicts keep insertion order): their subtrees have
                # most likely run already.
                for old in list(islice(self._chains, self._limit // 2)):
                    del self._chains[old]
            self._chains[task_id] = chain
