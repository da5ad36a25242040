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

`broker_transport` is set to this transport only for redis:// and rediss:// URLs
(`transport_for`); a Sentinel or socket URL keeps kombu's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with `Channel`."""

    Channel = Channel
