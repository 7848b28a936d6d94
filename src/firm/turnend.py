"""A reply that only delegates ends its turn in its delegations' own transaction.

Written apart, the delegations and the settle that yields were two commits on a manager's
path, and between them the manager still held its worker slot: its reports waited for a slot
it was about to free, and it paid a second commit and its session's end before freeing it
(benchmarks/makespan.py). When the brain says the reply ends its turn (DelegationBatch.
end_turn), the batch is written with the yield a settle would write next
(Store.delegate_and_yield): the task is `waiting` — or woken at once, when its reports are
all done already — from that commit on, the session has ended, and the engine settles it no
more. Its claim counts the slot the session frees as free.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from firm.errors import TaskNotHeld
from firm.store.base import DelegateResult, NewTask, PendingEvents, SettleResult
from firm.tasks import Outcome

if TYPE_CHECKING:
    from firm.lifecycle import LifecycleTools

Items = Sequence[tuple[PendingEvents, NewTask]]


class DelegationWriter(Protocol):
    """What writes a session's delegations (an engine's, engine/delegated.py): the store's
    delegate_many and delegate_and_yield, with a claim for the engine's free slots."""

    def __call__(
        self,
        parent_id: str,
        turn: int,
        items: Items,
        worker_id: str | None = None,
        events: PendingEvents = (),
    ) -> list[DelegateResult]: ...

    def ending(
        self, parent_id: str, turn: int, items: Items, worker_id: str, events: PendingEvents
    ) -> tuple[list[DelegateResult], SettleResult | None]:
        """The delegations and the turn's end (None: the delegations alone were written)."""
        ...


class TurnBatch:
    """What batch_delegations gives the brain (brains.protocol.DelegationBatch)."""

    __slots__ = ("ends",)

    def __init__(self) -> None:
        self.ends = False

    def end_turn(self) -> None:
        self.ends = True


def ended_with_delegations(session: LifecycleTools) -> bool:
    """Write the open batch and the turn's yield in one transaction, if the batch can carry
    the turn's end: there are delegations to write, the session has not ended otherwise (a
    fail_task in the block), and they start at once — a turn whose delegations wait for a
    person makes them a plan when it settles. Returns whether it did; the session has then
    ended. The entries deferred since the last delegation ride as the session's own, before
    the yield. A task no longer held writes nothing: the session stops (SessionCancelled)
    with every entry still owed."""
    batch, task = session._batch, session.task
    if not batch or session.outcome is not None or session.company.plan_for(task) is not None:
        return False
    session._batch, owed = [], session._deferred
    writer = session.write_delegations
    settled: SettleResult | None
    try:
        if writer is not None:
            _, settled = writer.ending(task.id, task.turn, batch, session.worker_id, owed)
        else:
            _, settled = session.store.delegate_and_yield(
                task.id, task.turn, batch, session.worker_id, owed
            )
    except TaskNotHeld as exc:
        session._deferred = [e for events, _ in batch for e in events] + owed
        raise session.lost_task(exc) from None
    if settled is None:
        return False  # the entries still owed wait for the settle, as after any flush
    session._deferred = []
    session.outcome = Outcome.yielded()
    session.settled = settled
    return True
