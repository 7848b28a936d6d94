"""What a brain is: something that works one session, through the session's tools."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from firm.brains.protocol import Session


class Brain(Protocol):
    """Works one session: reads session.brief, calls session.call(...) for tools.

    It ends the session by returning. If it called complete_task or fail_task, that is the
    outcome; if it delegated, the task waits for its reports; otherwise the text it returns
    is the result. A brain may block (it runs in a worker thread); it must call
    session.check_cancelled() (or any tool) between steps so cancellation reaches it.
    """

    name: str

    def run(self, session: Session) -> str | None: ...
