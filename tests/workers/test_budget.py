"""The worker's budget: one line for room, by priority then arrival; only its head looks."""

from __future__ import annotations

import threading

from tests.factories import wait_for
from workers.budget import Budget, Held


def _waiter(budget: Budget, segments: int, priority: int, order: list[int], tag: int):
    ticket = budget.enter(segments, priority, task_id=f"t{tag}")

    def run() -> None:
        while not budget.wait(ticket, look_s=60):
            pass
        order.append(tag)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_room_goes_by_priority_then_arrival():
    budget = Budget(10)
    first = budget.enter(10)
    assert budget.wait(first, look_s=1)
    order: list[int] = []
    threads = [
        _waiter(budget, 10, priority, order, tag)
        for tag, priority in enumerate([6, 3, 6, 0, 3])  # broker priority: 0 first
    ]
    assert budget.waiting() == (50, ["t3", "t1", "t4", "t0", "t2"])
    for n in range(len(threads)):
        budget.release(10)
        wait_for(lambda n=n: len(order) > n, timeout=5, what="the next in line")
    for thread in threads:
        thread.join(5)
    assert order == [3, 1, 4, 0, 2]


def test_the_first_chunk_always_fits_and_a_big_one_is_not_overtaken():
    budget = Budget(10)
    assert budget.wait(budget.enter(50), look_s=1)  # alone, larger than the budget
    order: list[int] = []
    big = _waiter(budget, 20, 0, order, 20)
    small = _waiter(budget, 1, 0, order, 1)
    small.join(0.2)
    assert order == []  # nothing fits while 50 are held
    budget.release(50)
    big.join(5)
    small.join(0.2)
    assert order == [20]  # 20 + 1 > 10: the small one waits for the big one's room
    budget.release(20)
    small.join(5)
    assert order == [20, 1]


def test_only_the_head_looks_elsewhere_and_a_new_head_looks_at_once():
    budget = Budget(10)
    assert budget.wait(budget.enter(10), look_s=1)
    head, second = budget.enter(10), budget.enter(10)
    looked: list[str] = []

    def second_waits() -> None:
        budget.wait(second, look_s=0.2)
        looked.append("second")

    thread = threading.Thread(target=second_waits, daemon=True)
    thread.start()
    assert not budget.wait(head, look_s=0.2)  # the head's turn to look
    thread.join(0.5)
    assert looked == []  # not the head: it keeps waiting, whatever its timeout
    budget.leave(head)  # handed back; the second is head now and has waited long enough
    thread.join(5)
    assert looked == ["second"]


def test_closing_sends_every_ticket_to_look_elsewhere():
    budget = Budget(10)
    assert budget.wait(budget.enter(10), look_s=1)
    tickets = [budget.enter(10) for _ in range(3)]
    budget.close()
    assert [budget.wait(t, look_s=60) for t in tickets] == [False] * 3


def test_a_take_gets_what_room_there_is_and_none_past_a_line():
    budget = Budget(10)
    assert budget.take_up_to(25, 5) == 25  # nothing held: the chunk fits, nothing beside it
    budget.release(25)
    assert budget.take_up_to(4, 0) == 4
    assert budget.take_up_to(2, 25) == 6  # the chunk and the rest of the room beside it
    assert budget.take_up_to(1, 3) == 0 and budget.held == 10  # the chunk does not fit
    budget.release(6)
    waiting = budget.enter(8)  # a task waits in line: no room is taken past it
    assert budget.take_up_to(1, 0) == 0
    budget.leave(waiting)
    budget.close()
    assert budget.take_up_to(1, 0) == 0


def test_held_room_is_given_back_in_part_then_whole_once():
    budget = Budget(10)
    held = Held(budget, budget.take_up_to(2, 8))
    assert held.segments == 10
    held.keep(3)  # what the take needed: the spare 7 go back at once
    assert budget.held == 3
    held.release()
    held.release()  # a second release gives back nothing more
    assert budget.held == 0
