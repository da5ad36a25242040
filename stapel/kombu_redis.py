"""kombu's Redis transport, with one Redis client per channel instead of one per command.

kombu's Redis channel builds a new `redis.Redis` around its connection pool for every
publish, acknowledgement and queue operation (`Channel.conn_or_acquire`), and redis-py
builds a table of some 200 response callbacks in each: about 60 us a call here, several
calls per task (its events, its message's place among the unacknowledged, its ack), 15%
of a worker's own Python time when translation is cheap
(docs/design/kombu-redis-clients.md). A Redis client on a connection pool is safe to
share between threads (each command takes a connection from the pool for its length), so
this channel keeps one and builds it again only when the pool is a new one (after a fork
or a reconnect).

It also closes a channel whole when Redis went away under it. kombu's `Channel.close`
first reads the reply of a pending BRPOP; with the connection gone that read raises, the
close stops half-way and the channel keeps its unacknowledged messages. Its next close
comes after the connection was collected (`transport.client` is None), so restoring
them builds a connection pool from nothing and raises `AttributeError: 'NoneType' object
has no attribute 'hostname'`, which no caller ignores: the worker exits with
"Unrecoverable error". Reported upstream as celery/kombu#582 (the same AttributeError
from a closing channel) and celery/kombu#970 (restore_unacked at close); here the lost
BRPOP reply is dropped and the close goes on, and a channel whose connection is closed
says so as a connection error, which kombu's and Celery's close paths ignore. The
messages stay in Redis's `unacked` hash and come back after the visibility timeout (and
the watchdog resends their chunks sooner).

`broker_transport` is set to this transport only for redis:// and rediss:// URLs
(`transport_for`); a Sentinel or socket URL keeps kombu's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from queue import Empty
from typing import Any
from urllib.parse import urlsplit

import redis
from kombu.transport import redis as kombu_redis

TRANSPORT = "stapel.kombu_redis:Transport"


def transport_for(url: str) -> str | None:
    """Return this transport's name for a plain Redis URL; None keeps kombu's choice."""
    return TRANSPORT if urlsplit(url).scheme in ("redis", "rediss") else None


class Channel(kombu_redis.Channel):
    """kombu's Redis channel, sharing one client on its connection pool between calls."""

    _shared: redis.Redis | None = None

    @contextmanager
    def conn_or_acquire(self, client: redis.Redis | None = None) -> Iterator[redis.Redis]:
        if client:
            yield client
            return
        shared = self._shared
        if shared is None or shared.connection_pool is not self.pool:
            shared = self._shared = self._create_client()
        yield shared

    def close(self) -> None:
        if self._in_poll:
            try:
                self._brpop_read()
            except Empty:
                pass
            except self.connection.connection_errors:
                self._in_poll = False  # the reply went with the connection
        super().close()

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:
            raise redis.exceptions.ConnectionError("broker connection already closed")
        params: dict[str, Any] = super()._connparams(asynchronous=asynchronous)
        return params


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with `Channel`."""

    Channel = Channel
