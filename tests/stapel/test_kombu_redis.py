"""The broker transport: kombu's Redis channel sharing one client instead of one per call."""

from __future__ import annotations

import os
import time
from queue import Empty

import pytest
from kombu import Connection
from kombu.asynchronous import Hub

from stapel.celery_config import celery_config
from stapel.kombu_redis import (
    SENTINEL_TRANSPORT,
    SOCKET_TRANSPORT,
    TRANSPORT,
    Channel,
    Pace,
    QoS,
    SentinelChannel,
    transport_for,
)
from stapel.settings import Settings


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6379/0", TRANSPORT),
        ("rediss://cache.example:6380/1", TRANSPORT),
        ("sentinel://sentinel.example:26379", SENTINEL_TRANSPORT),
        ("sentinel://a:26379;sentinel://b:26379", SENTINEL_TRANSPORT),
        ("redis+socket:///run/redis.sock", None),  # its prefix picks kombu's own anyway
        ("unix:///run/redis.sock?db=2", SOCKET_TRANSPORT),
        ("memory://", None),
    ],
)
def test_every_redis_url_gets_a_transport_with_the_fixes(url, expected):
    assert transport_for(url) == expected


def test_a_sentinel_connection_builds_stapels_channel_class():
    conn = Connection(
        "sentinel://127.0.0.1:1;sentinel://127.0.0.1:2",
        transport=transport_for("sentinel://127.0.0.1:1"),
        transport_options={"master_name": "stapel"},
    )
    assert conn.transport_cls == SENTINEL_TRANSPORT
    assert conn.transport.Channel is SentinelChannel
    assert conn.transport.default_port == 26379
    assert conn.alt == ["sentinel://127.0.0.1:1", "sentinel://127.0.0.1:2"]


def test_celery_is_configured_with_the_transport(redis_url):
    config = celery_config(Settings.from_env({**os.environ, "REDIS_URL": redis_url}))
    assert config["broker_transport"] == TRANSPORT


def test_a_channel_reuses_one_client_and_renews_it_with_its_pool(redis_url, redis_client):
    with Connection(redis_url, transport=TRANSPORT) as conn:
        channel = conn.default_channel
        assert isinstance(channel, Channel)
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
        given = object()
        with channel.conn_or_acquire(given) as passed:
            assert passed is given  # a caller's own client is used as it is
        channel._disconnect_pools()  # what kombu does after a fork or on reconnect
        with channel.conn_or_acquire() as renewed:
            assert renewed is not first
            assert renewed.connection_pool is channel.pool
            assert renewed.ping()


def test_messages_travel_and_are_acknowledged_through_the_shared_client(redis_url, redis_client):
    with Connection(redis_url, transport=TRANSPORT) as conn:
        queue = conn.SimpleQueue("stapel-transport-test")
        for n in range(3):
            queue.put({"n": n})
        got = []
        for _ in range(3):
            message = queue.get(timeout=5)
            got.append(message.payload["n"])
            assert redis_client.hlen("unacked") == 1  # held until acknowledged
            message.ack()
            assert redis_client.hlen("unacked") == 0
        assert got == [0, 1, 2]
        queue.close()


def test_acks_on_an_event_loop_leave_unacked_together_and_before_the_channel_closes(
    redis_url, redis_client
):
    with Connection(redis_url, transport=TRANSPORT) as conn:
        conn.transport.stapel_hub = Hub()  # what a worker's event loop registers
        queue = conn.SimpleQueue("stapel-transport-acks")
        for n in range(3):
            queue.put({"n": n})
        messages = [queue.get(timeout=5) for _ in range(3)]
        for message in messages:
            message.ack()
        qos = conn.default_channel.qos
        assert not set(qos._delivered) - qos._dirty  # the prefetch slots are free at once
        assert redis_client.hlen("unacked") == 3  # their removal waits for the flush
        qos.flush_acks()
        assert redis_client.hlen("unacked") == 0 and redis_client.zcard("unacked_index") == 0
        queue.put({"n": 3})
        queue.get(timeout=5).ack()
        queue.close()
        conn.default_channel.close()  # a closing channel flushes what waits
        assert redis_client.hlen("unacked") == 0


def test_a_paced_delivery_holds_the_lower_levels_until_the_pause_ends(
    redis_url, redis_client, monkeypatch
):
    """After a paced delivery the consumer asks only for Redis's first level (the
    interactive lane, the API's priority 9) until the pause ends; a delivery from there
    neither waits nor starts a pause of its own."""
    pause_s = 1.5  # the checks after a delivery run well within it, even on a loaded machine
    monkeypatch.setattr(QoS, "pace", Pace(pause_s, lambda headers: headers.get("paced") == 1))
    with Connection(redis_url, transport=TRANSPORT) as conn:
        hub = conn.transport.stapel_hub = Hub()  # what a worker's event loop registers
        queue = conn.SimpleQueue("stapel-transport-pace")
        lower = 3  # a level below the first (kombu's: 0 is served first)
        queue.put({"n": 0}, headers={"paced": 1}, priority=lower)
        queue.put({"n": 1}, priority=lower)
        queue.put({"n": 2}, headers={"paced": 1}, priority=lower)
        queue.put({"n": 3}, priority=lower)
        channel = conn.default_channel
        qos, held_key = channel.qos, channel._q_for_pri("stapel-transport-pace", lower)

        queue.get(timeout=5).ack()
        delivered, until = time.monotonic(), qos._paused_until
        assert qos.pause_left() > 0
        with pytest.raises(Empty):  # the lower level is not asked for while the pause lasts
            queue.get(timeout=0.05)
        assert redis_client.llen(held_key) == 3
        queue.put({"n": "first level"}, headers={"paced": 1})
        urgent = queue.get(timeout=pause_s / 2)
        assert urgent.payload == {"n": "first level"}
        assert qos._paused_until == until  # delivered inside the pause, which it left as it was
        urgent.ack()
        got = None
        while got is None and time.monotonic() < delivered + 5:
            try:
                got = queue.get(timeout=0.05)
            except Empty:
                pass
        assert got is not None and got.payload == {"n": 1}
        assert time.monotonic() - delivered >= pause_s  # the clock ended it (no loop ran)
        got.ack()
        assert qos.pause_left() == 0  # an unpaced message leaves the consumer going
        assert queue.get(timeout=5).payload == {"n": 2}

        assert qos.pause_left() > 0
        with pytest.raises(Empty):  # a first-level BRPOP now waits for the rest of the pause
            queue.get(timeout=0.05)
        *_, resume = hub.timer.queue  # the loop runs it when the pause is due
        assert resume.eta >= time.monotonic()
        resume.entry()
        assert qos.pause_left() == 0
        # the waiting BRPOP is unblocked as the pause ends, well before its own timeout
        assert queue.get(timeout=pause_s / 3).payload == {"n": 3}
        queue.close()
