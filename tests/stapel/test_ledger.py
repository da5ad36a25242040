"""The day's use per tenant: concurrent writers of one process land on rows of their own."""

from __future__ import annotations

import threading

from stapel import ledger

THREADS = 8


def test_threads_of_one_process_write_rows_of_their_own():
    """A web process's threads add to the tenant's day at once: one row each, so their
    commits do not wait for each other's row lock."""
    started = threading.Barrier(THREADS)
    slots: list[int] = []

    def pick() -> None:
        started.wait(timeout=30)  # all alive at once: no thread id is reused
        slots.append(ledger._slot())
        started.wait(timeout=30)

    threads = [threading.Thread(target=pick) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(slots)) == THREADS, slots
