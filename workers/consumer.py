"""The worker's Celery consumer: task events go out in one message per EVENT_FLUSH_S.

Celery buffers a worker's task events (received, started, succeeded: Flower's view)
and, for every event a task thread buffers, wakes the consumer's event loop to publish
what the buffer holds. With many short tasks that is a wake-up of the loop's thread and
a Redis PUBLISH for every one or two events (1.8 publishes a task:
docs/design/event-batching.md). Here the first event buffered after a flush
asks the loop for one flush EVENT_FLUSH_S later, and the events buffered meanwhile ride
along: one publish and one wake-up per period while tasks run. Flower sees a task's
events at most EVENT_FLUSH_S late; Celery still flushes at once when a buffer holds
its limit (24 events), and what is buffered is flushed before the consumer shuts down.
A run the loop dropped (a broker reconnect resets it) is asked for again by the first
event after STALE_PERIODS periods.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from celery.worker.consumer import Consumer as CeleryConsumer
from kombu.asynchronous import Hub
from vine import promise

EVENT_FLUSH_S = 0.1
"""At most this long between a task event and its publish (Flower's delay)."""


STALE_PERIODS = 10
"""A run asked for and not come after this many periods was dropped (a broker reconnect
resets the loop and cancels timer entries): the next request asks again."""


class Coalescer:
    """Runs `flush` on the hub's thread `period` seconds after the first request since
    the last run; requests meanwhile (from any thread) join that run."""

    def __init__(self, hub: Hub, flush: Callable[[], None], period: float) -> None:
        self.hub, self.flush, self.period = hub, flush, period
        self.asked: float | None = None
        """When the pending run was asked for (None: no run pending)."""
        self._schedule = promise(self._start_timer)

    def request(self) -> None:
        """Ask for a flush (any thread). Two threads seeing no run pending at once
        schedule two runs: one flush too many, never an event left behind."""
        now = time.monotonic()
        if self.asked is None or now - self.asked > STALE_PERIODS * self.period:
            self.asked = now
            self.hub.call_soon(self._schedule)  # the timer is the hub thread's alone

    def _start_timer(self) -> None:
        self.hub.call_later(self.period, self._run)

    def _run(self) -> None:
        # reset first: an event buffered from here on asks for the next run itself
        self.asked = None
        self.flush()


class Consumer(CeleryConsumer):
    """Celery's consumer, its task events flushed by a Coalescer (`worker_consumer`)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._events = Coalescer(self.hub, self._flush_events, EVENT_FLUSH_S) if self.hub else None

    def on_send_event_buffered(self) -> None:
        if self._events is not None:
            self._events.request()

    def shutdown(self) -> None:
        self._flush_events()  # what still waits for its period
        super().shutdown()
