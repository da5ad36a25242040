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

Acknowledgements go out together (`QoS`): on a worker's event loop an ack frees the
message's prefetch slot at once, and its removal from Redis's `unacked` hash and index
waits up to ACK_FLUSH_S for the acks after it, one pipeline for all (kombu sends one
per message, on the loop's thread, between deliveries). A worker that dies before the
flush leaves those messages in `unacked`; they are delivered again after the
visibility timeout, and a chunk's task finds its chunk ended (every task is
idempotent). A closing channel flushes first.

Consumption can be paced (`QoS.pace`, set by a worker whose tasks take messages along:
workers/takealong.py): after delivering a message the pace names, the consumer's BRPOPs
ask only for Redis's first level for that long, where the interactive lane and the API's
priority 9 wait (a caller waits on them). What arrives meanwhile at the other levels
waits in the queue, and the next delivered task takes it along in one round trip
(Celery's delivery of each would cost the worker 0.6-3 ms of CPU:
docs/design/worker-cost.md). When the pause ends, a first-level BRPOP still waiting is
unblocked (CLIENT UNBLOCK), as Redis would time it out only at its next cron tick.

`transport_for` names this transport for redis:// and rediss:// URLs, `SocketTransport`
(the same channel) for a unix socket (unix://, the form redis-py reads too) and
`SentinelTransport` for sentinel:// URLs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from queue import Empty, SimpleQueue
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlencode, urlsplit

import redis
from kombu.asynchronous import Hub
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from vine import promise

log = logging.getLogger(__name__)

ACK_FLUSH_S = 0.005
"""At most this long between a message's ack and its removal from `unacked`."""
ACK_FLUSH_AT = 128
"""This many acks waiting are flushed at once."""
STALE_FLUSH_S = 1.0
"""A flush asked for this long ago and not run was dropped: the next ack asks again."""

PAUSED_BRPOP_MIN_S = 0.001
"""A BRPOP sent in a pause's last instant still waits this long (Redis reads 0 as for ever)."""

TRANSPORT = "stapel.kombu_redis:Transport"


class _Unblocker:
    """Sends CLIENT UNBLOCK from a thread of its own: the event loop never waits on Redis
    for it (a Redis cut off would hold the loop for the command's timeouts and retries).
    One sent late ends whatever BRPOP the connection waits in then, which returns empty
    as on its timeout, and the loop sends the next."""

    def __init__(self) -> None:
        self._waiting: SimpleQueue[tuple[redis.Redis, int]] = SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def send(self, client: redis.Redis, client_id: int) -> None:
        with self._lock:  # started again after a fork, where the thread is not
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="brpop-unblock", daemon=True)
                self._thread.start()
        self._waiting.put((client, client_id))

    def _run(self) -> None:
        while True:
            client, client_id = self._waiting.get()
            try:
                client.execute_command("CLIENT", "UNBLOCK", client_id)
            except redis.RedisError as exc:  # it times out on its own, a little later
                log.debug("first-level BRPOP not unblocked error=%s", type(exc).__name__)


UNBLOCKER = _Unblocker()


def transport_for(url: str) -> str | None:
    """Return the name of this module's transport for a Redis URL; None keeps kombu's."""
    return TRANSPORTS.get(urlsplit(url).scheme)


@dataclass(frozen=True)
class Pace:
    """After delivering a message `after` accepts, the consumer sends its next BRPOP
    `seconds` later (set by a worker whose tasks take messages along: workers/takealong.py)."""

    seconds: float
    after: Callable[[dict], bool]


class QoS(kombu_redis.QoS):
    """kombu's Redis QoS, its acks' Redis writes flushed together on the event loop,
    its consumption paced after the messages `pace` names."""

    pace: ClassVar[Pace | None] = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._acked: list[str] = []
        self._ack_lock = threading.Lock()
        self._asked_at = 0.0
        self._paused_until = 0.0

    def append(self, message, delivery_tag: str) -> None:
        super().append(message, delivery_tag)
        pace, hub = self.pace, getattr(self.channel.connection, "stapel_hub", None)
        if pace is None or hub is None or self.pause_left() > 0:
            return  # a delivery inside a pause (Redis's first level) starts none
        if not pace.after(message.headers or {}):
            return
        # on the loop's thread (a BRPOP's reply): the loop's next BRPOPs ask for the
        # first level only (`Channel._brpop_start`), each until the pause ends, and the
        # timer wakes the loop then (a dropped timer: the clock ends it too)
        self._paused_until = time.monotonic() + pace.seconds
        hub.call_later(pace.seconds, self._resume)

    def _resume(self) -> None:
        self._paused_until = 0.0
        if isinstance(self.channel, Channel):
            self.channel.end_pause()

    def pause_left(self) -> float:
        """Seconds until the consumer's pause ends (0: not paused)."""
        if not self._paused_until:
            return 0.0
        return max(self._paused_until - time.monotonic(), 0.0)

    def ack(self, delivery_tag: str) -> None:
        hub: Hub | None = getattr(self.channel.connection, "stapel_hub", None)
        if hub is None:  # no event loop (a plain kombu consumer): kombu's own ack
            super().ack(delivery_tag)
            return
        virtual.QoS.ack(self, delivery_tag)  # the prefetch slot is free now
        now = time.monotonic()
        with self._ack_lock:
            self._acked.append(delivery_tag)
            waiting = len(self._acked)
            # the first since a flush asks for one and the rest ride along; a flush the
            # loop dropped (a reconnect cancels its timers) is asked for again
            ask = waiting == 1 or now - self._asked_at > STALE_FLUSH_S
            if ask:
                self._asked_at = now
        if waiting >= ACK_FLUSH_AT:
            self.flush_acks()
        elif ask:
            hub.call_soon(promise(lambda: hub.call_later(ACK_FLUSH_S, self.flush_acks)))

    def flush_acks(self) -> None:
        """Remove the acknowledged messages from `unacked`, in one round trip."""
        with self._ack_lock:
            tags, self._acked = self._acked, []
        if not tags:
            return
        try:
            with self.pipe_or_acquire() as pipe:
                pipe.zrem(self.unacked_index_key, *tags).hdel(self.unacked_key, *tags).execute()
        except redis.RedisError as exc:  # delivered again after the visibility timeout
            log.warning("acks not flushed count=%d error=%s", len(tags), type(exc).__name__)


class Channel(kombu_redis.Channel):
    """kombu's Redis channel, sharing one client on its connection pool between calls."""

    QoS = QoS
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
        if self._qos is not None:
            self._qos.flush_acks()  # a Redis gone logs and leaves them in `unacked`
        if self._in_poll:
            self.end_pause()  # a first-level BRPOP would hold the read to its timeout
            try:
                self._brpop_read()
            except Empty:
                pass
            except self.connection.connection_errors:
                self._in_poll = False  # the reply went with the connection
        super().close()

    _first_level_poll: int | None = None
    """The Redis client id of the connection whose BRPOP now waits on the first level
    only (None: the last BRPOP sent asks for every level)."""
    _known_id: tuple[Any, int | None] | None = None
    """(socket, its Redis client id or None where refused) of the BRPOP connection,
    asked once a socket."""

    def _brpop_start(self, timeout=None) -> None:
        # During the consumer's pause (QoS.pace) only Redis's first level is asked for,
        # until the pause ends: the interactive lane and the API's priority 9 are
        # delivered at once, what waits at other levels is taken along after it.
        self._first_level_poll = None
        left = self.qos.pause_left() if isinstance(self.qos, QoS) else 0.0
        if left <= 0:
            super()._brpop_start(timeout)
            return
        queues = self._queue_cycle.consume(len(self.active_queues))
        if not queues:
            return
        connection = self.client.connection
        client_id = self._client_id(connection)
        wait = max(round(left, 3), PAUSED_BRPOP_MIN_S)  # 0 would block for good
        command = ["BRPOP", *(self._q_for_pri(queue, 0) for queue in queues), wait]
        if self.global_keyprefix:
            command = self.client._prefix_args(command)
        self._in_poll = connection
        self._brpop_sent_at = time.monotonic()  # type: ignore[assignment]  # kombu: None
        connection.send_command(*command)
        self._first_level_poll = client_id

    def _client_id(self, connection) -> int | None:
        """The connection's Redis client id (one round trip for each new socket; None
        where Redis refuses CLIENT ID)."""
        known = self._known_id
        if known is not None and known[0] is connection._sock:
            return known[1]
        client_id: int | None = None
        try:
            connection.send_command("CLIENT", "ID")
            client_id = int(connection.read_response())
        except redis.ResponseError as exc:  # asked again only on a new socket
            log.warning("CLIENT ID refused, pauses may end late error=%s", exc)
        self._known_id = (connection._sock, client_id)
        return client_id

    def end_pause(self) -> None:
        """End a first-level BRPOP still waiting when the pause ends (the loop's thread).

        Redis times a blocked command out only when its event loop next wakes, up to
        1/hz late (100 ms at its default hz 10), so the BRPOP is unblocked instead (by
        UNBLOCKER's thread) and the next one asks for every level. Where Redis refuses
        CLIENT UNBLOCK it times out on its own, that much later.
        """
        client_id, self._first_level_poll = self._first_level_poll, None
        if client_id is None or not self._in_poll:
            return
        with self.conn_or_acquire() as client:
            UNBLOCKER.send(client, client_id)

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:
            raise redis.exceptions.ConnectionError("broker connection already closed")
        params: dict[str, Any] = super()._connparams(asynchronous=asynchronous)
        return params


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with `Channel`; it keeps the event loop it runs on."""

    Channel = Channel
    stapel_hub: Hub | None = None

    def register_with_event_loop(self, connection, loop: Hub) -> None:
        self.stapel_hub = loop
        super().register_with_event_loop(connection, loop)


class SocketTransport(Transport):
    """`Transport` on a unix socket, from redis-py's URL (`unix:///path?db=N`).

    Stapel's own Redis clients read that URL too. kombu reads a socket only from
    `socket://<path>?virtual_host=<db>`, kept whole in the connection's hostname (its
    `redis+socket://` would choose kombu's own transport over the one named).
    """

    can_parse_url = True

    def __init__(self, client, **kwargs) -> None:
        client.hostname = _kombu_socket_url(client.hostname)
        super().__init__(client, **kwargs)


def _kombu_socket_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme != "unix":
        return url
    query = [
        ("virtual_host" if key == "db" else key, value)
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
    ]
    tail = f"?{urlencode(query)}" if query else ""
    return f"socket://{parts.netloc}{parts.path}{tail}"


class SentinelChannel(Channel, kombu_redis.SentinelChannel):
    """kombu's Sentinel channel with `Channel`'s shared client, close and acks."""


class SentinelTransport(Transport, kombu_redis.SentinelTransport):
    """kombu's Sentinel transport with `SentinelChannel`."""

    Channel = SentinelChannel
    default_port = kombu_redis.SentinelTransport.default_port


SOCKET_TRANSPORT = "stapel.kombu_redis:SocketTransport"
SENTINEL_TRANSPORT = "stapel.kombu_redis:SentinelTransport"
TRANSPORTS = {
    "redis": TRANSPORT,
    "rediss": TRANSPORT,
    "unix": SOCKET_TRANSPORT,
    "sentinel": SENTINEL_TRANSPORT,
}
"""URL scheme -> the transport `transport_for` names."""
