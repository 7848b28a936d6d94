"""The engine's slots: a claim holds free slots for its write, and what it started or did not
need stops counting as held as soon as it can, so a session it started and that delegates at
once finds room for its reports (engine/slots.py)."""

from __future__ import annotations

import threading

from firm.engine.slots import Slots


def hold_on_another_thread(slots: Slots, most: int) -> int:
    got: list[int] = []
    thread = threading.Thread(target=lambda: got.append(_room(slots, most)))
    thread.start()
    thread.join()
    return got[0]


def _room(slots: Slots, most: int) -> int:
    with slots.hold(most) as room:
        return room


def test_a_round_that_claimed_one_task_leaves_the_rest_free_while_its_block_goes_on() -> None:
    slots = Slots(8)
    with slots.hold(8) as room:
        assert room == 8 and slots.free() == 0
        slots.keep(1)  # its claim came back with one task
        with slots.lock:
            assert slots.enter("T-ceo", threading.Event()) == 1
        # The goal's session delegates to three reports before the round's block has ended.
        assert hold_on_another_thread(slots, 3) == 3
        assert slots.free() == 7
    assert slots.free() == 7


def test_a_started_task_is_counted_once_not_as_running_and_held() -> None:
    slots = Slots(4)
    with slots.hold(2) as room:
        assert room == 2 and slots.free() == 2
        with slots.lock:
            slots.enter("T-1", threading.Event())
            slots.enter("T-2", threading.Event())
        assert slots.free() == 2
        with slots.lock:  # a third, past what the hold took, is simply running
            slots.enter("T-3", threading.Event())
        assert slots.free() == 1
    assert slots.free() == 1
    assert hold_on_another_thread(slots, 5) == 1


def test_what_a_hold_did_not_start_is_let_go_when_its_block_ends_even_on_error() -> None:
    slots = Slots(3)
    try:
        with slots.hold(3):
            with slots.lock:
                slots.enter("T-1", threading.Event())
            raise RuntimeError("the claim's write failed")
    except RuntimeError:
        pass
    assert slots.free() == 2


def test_holds_on_two_threads_never_count_the_same_slot() -> None:
    slots = Slots(5)
    with slots.hold(3) as mine:
        assert mine == 3
        assert hold_on_another_thread(slots, 5) == 2  # what is left, not what it asked for
    assert slots.free() == 5
