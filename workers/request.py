"""The worker's task request: a late ack on a channel a lost broker closed is dropped.

When Redis goes away, Celery restores the unacknowledged messages of the old
connection and closes it. A task that was running then finishes later and acks on
that closed channel; kombu's Redis transport raises AttributeError there (its client
is gone), not a connection error, and raised inside the worker's event loop it stops
the consumer and with it the worker (docs/reliability.md tells how it was found). The
message is back in its queue (or was lost with the Redis,
and the watchdog resends its chunk), and the chunk's claim makes a second delivery a
no-op, so the ack can go. Celery still logs it as "Couldn't ack".
"""

from __future__ import annotations

from celery import Task as CeleryTask
from celery.worker.request import Request as CeleryRequest

CLOSED_CHANNEL_ERRORS: tuple[type[BaseException], ...] = (AttributeError,)
"""What kombu's Redis transport raises when a message is acked on a closed channel."""


class Request(CeleryRequest):
    """A Celery request whose ack and reject survive a channel closed under them.

    Celery's ack and reject log and swallow the errors in `_connection_errors` (they
    use it for nothing else); this request counts a closed channel's among them.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._connection_errors: tuple[type[BaseException], ...] = (
            tuple(self._connection_errors) + CLOSED_CHANNEL_ERRORS
        )


class Task(CeleryTask):
    """The base of every Stapel task: requests of the class above."""

    Request = Request
