"""A model call's token usage, written with the session's next write instead of a
transaction of its own.

A session records each reply's usage as the reply comes in. Committed at once, that was a
write per model call between the reply and whatever the session does next — on a team's
chain, a commit in every gap between a reply and the next request. Here the usage is owed
by the thread that recorded it (a session runs on one thread) and added, in the same
transaction, by that thread's next write: the reply's tool call's start, its delegations,
its settle — or, before the session's next model call or wait, a write of its own
(Session.flush_owed), so people watching see it no later than before.

Budget safety: a check counts the tokens still owed on top of what it read (`owed_tokens`).
The owed usage is taken at the start of a write, before anything that write reads, and put
back if the write fails; so a read outside a write sees the row without it and adds it, a
read inside a write sees it in the row and adds nothing. A call right after a budget ran
out is refused as before.
"""

from __future__ import annotations

import threading

from sqlalchemy import Connection, bindparam, update

from firm.store import schema
from firm.store.prepared import run

T = schema.tasks

ADD_USAGE = (
    update(T)
    .where(T.c.id == bindparam("p_id"))
    .values(
        calls=T.c.calls + bindparam("p_calls"),
        prompt_tokens=T.c.prompt_tokens + bindparam("p_prompt"),
        completion_tokens=T.c.completion_tokens + bindparam("p_done"),
    )
)

Owed = dict[str, list[int]]  # task id -> [calls, prompt tokens, completion tokens]


class OwedUsage(threading.local):
    """Usage recorded on this thread and not written yet."""

    def __init__(self) -> None:
        self.owed: Owed = {}

    def add(self, task_id: str, calls: int, prompt_tokens: int, completion_tokens: int) -> None:
        held = self.owed.setdefault(task_id, [0, 0, 0])
        held[0] += calls
        held[1] += prompt_tokens
        held[2] += completion_tokens

    def tokens(self, task_id: str) -> int:
        held = self.owed.get(task_id)
        return 0 if held is None else held[1] + held[2]

    def take(self) -> Owed:
        """What is owed, handed to a write that will add it (`pay`); owed no more."""
        taken, self.owed = self.owed, {}
        return taken

    def put_back(self, taken: Owed) -> None:
        """What a failed write took: owed again, for the next write."""
        for task_id, (calls, prompt, done) in taken.items():
            self.add(task_id, calls, prompt, done)


def pay(conn: Connection, taken: Owed) -> None:
    for task_id, (calls, prompt, done) in taken.items():
        params = {"p_id": task_id, "p_calls": calls, "p_prompt": prompt, "p_done": done}
        run(conn, ADD_USAGE, params)
