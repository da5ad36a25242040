"""Task events in one publish per period: the consumer's Coalescer on a real kombu Hub."""

from __future__ import annotations

import threading
import time

from kombu.asynchronous import Hub

from workers.consumer import STALE_PERIODS, Coalescer


def run_until(hub: Hub, done, timeout: float = 10) -> None:
    """Turn the hub's loop until done() (a deadline, not a sleep)."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the hub never got there"
        hub.run_once()


def test_requests_from_many_threads_before_a_run_make_one_flush():
    hub = Hub()
    flushes: list[int] = []
    coalescer = Coalescer(hub, lambda: flushes.append(len(flushes)), period=0.01)
    threads = [threading.Thread(target=coalescer.request) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run_until(hub, lambda: flushes)
    assert flushes == [0] and coalescer.asked is None
    coalescer.request()  # after a run: the next request asks for the next run
    assert coalescer.asked is not None
    run_until(hub, lambda: len(flushes) == 2)
    hub.close()


def test_a_request_while_the_flush_runs_gets_a_run_of_its_own():
    """An event buffered while a flush publishes may miss that publish: it asks again."""
    hub = Hub()
    flushes: list[int] = []

    def flush() -> None:
        flushes.append(1)
        if len(flushes) == 1:
            coalescer.request()  # as a task thread buffering an event mid-flush would

    coalescer = Coalescer(hub, flush, period=0.01)
    coalescer.request()
    run_until(hub, lambda: len(flushes) == 2)
    hub.close()


def test_a_run_asked_for_and_dropped_is_asked_for_again_once_stale():
    """A broker reconnect resets the loop: a run it dropped must not stop the flushes."""
    hub = Hub()
    flushes: list[int] = []
    coalescer = Coalescer(hub, lambda: flushes.append(1), period=0.01)
    coalescer.request()
    hub._ready.clear()  # the dropped run (what a reset loses)
    coalescer.request()  # not stale yet: it joins the (lost) run
    assert not hub._ready
    coalescer.asked -= 2 * STALE_PERIODS * coalescer.period  # long past its period
    coalescer.request()
    run_until(hub, lambda: flushes)
    hub.close()
