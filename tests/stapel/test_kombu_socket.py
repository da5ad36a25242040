"""The broker on a unix socket and through Sentinel: Stapel's transports over real servers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Iterator

import pytest
import redis
from kombu import Connection, Exchange, Queue
from kombu.common import ignore_errors

from stapel.celery_config import celery_config
from stapel.embedded_redis import server_binary
from stapel.kombu_redis import SOCKET_TRANSPORT, Channel, SentinelChannel, transport_for
from stapel.settings import Settings
from tests.conftest import free_port
from tests.factories import wait_for

pytestmark = pytest.mark.process


@pytest.fixture
def socket_url(tmp_path) -> Iterator[str]:
    """A redis-server of the test's own listening on a unix socket only (no TCP port)."""
    path = tmp_path / "redis.sock"
    proc = subprocess.Popen(
        [server_binary(), "--port", "0", "--unixsocket", str(path), "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path), "--logfile", str(tmp_path / "log")]
    )  # fmt: skip
    url = f"unix://{path}?db=2"
    try:
        wait_for(lambda: _answers(url), timeout=30, what="redis on its unix socket")
        yield url
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_timeout=1).ping())
    except redis.RedisError:
        return False


def _broker(url: str) -> Connection:
    """The broker connection Celery makes from the configuration of REDIS_URL=url."""
    config = celery_config(Settings.from_env({**os.environ, "REDIS_URL": url}))
    assert config["broker_transport"] == SOCKET_TRANSPORT
    assert _answers(config["broker_url"])  # redis-py reads it too (stapel.broker's publisher)
    return Connection(config["broker_url"], transport=config["broker_transport"])


def _queue(name: str) -> Queue:
    return Queue(name, Exchange(name, type="direct"), routing_key=name)


def test_messages_travel_over_the_socket_in_the_db_the_url_names(socket_url):
    with _broker(socket_url) as conn:
        assert isinstance(conn.default_channel, Channel)
        queue = conn.SimpleQueue("stapel-socket-test")
        queue.put({"n": 1})
        message = queue.get(timeout=5)
        assert message.payload == {"n": 1}
        assert redis.Redis.from_url(socket_url).hlen("unacked") == 1  # db 2, as the URL says
        message.ack()
        assert redis.Redis.from_url(socket_url).hlen("unacked") == 0
        queue.close()


def test_a_socket_channel_closes_after_redis_died_under_a_pending_read(socket_url):
    """Celery's close sequence on a lost broker (as in tests/faults/test_redis_kill_workers):
    the channel holding an unacknowledged message with a BRPOP pending closes whole on
    the first try, and the close after `collect()` raises nothing."""
    conn = _broker(socket_url)
    held = _queue("held")
    with conn.Producer() as producer:
        producer.publish({"n": 1}, exchange=held.exchange, routing_key="held", declare=[held])
    got: list = []
    channel = conn.channel()
    consumer = conn.Consumer([held], channel=channel, callbacks=[lambda _b, m: got.append(m)])
    consumer.qos(prefetch_count=0)
    consumer.consume()
    conn.drain_events(timeout=5)
    with pytest.raises(socket.timeout):
        conn.drain_events(timeout=0.2)  # leaves a BRPOP pending
    assert len(got) == 1 and channel._in_poll

    pid = int(redis.Redis.from_url(socket_url).info("server")["process_id"])
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not _answers(socket_url), timeout=30, what="redis to be gone")
    try:
        conn.collect(socket_timeout=1)
    except Exception:  # Celery ignores anything collect raises too
        pass
    assert channel.closed
    ignore_errors(conn, channel.close)
    channel.close()  # a later close is a no-op, not the worker-killing AttributeError
    ignore_errors(conn, conn.close)


def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture
def sentinel(tmp_path) -> Iterator[tuple[str, str]]:
    """(sentinel URL, master URL): a redis-server and a Sentinel watching it, both ours."""
    master, watcher = free_port(), free_port()
    config = tmp_path / "sentinel.conf"
    config.write_text(
        f"port {watcher}\nbind 127.0.0.1\ndir {tmp_path}\n"
        f"sentinel monitor stapel 127.0.0.1 {master} 1\n"
    )
    procs = [
        _start([server_binary(), "--port", str(master), "--bind", "127.0.0.1", "--save", "",
                "--dir", str(tmp_path)]),
        _start([server_binary(), str(config), "--sentinel"]),
    ]  # fmt: skip
    try:
        probe = redis.Redis(port=watcher, socket_timeout=1)
        wait_for(
            lambda: _sentinel_knows(probe),
            timeout=30,
            what="the Sentinel to name the master",
        )
        yield f"sentinel://127.0.0.1:{watcher}", f"redis://127.0.0.1:{master}/0"
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=30)


def _sentinel_knows(probe: redis.Redis) -> bool:
    try:
        return probe.sentinel_get_master_addr_by_name("stapel") is not None
    except redis.RedisError:
        return False


def test_a_sentinel_broker_uses_stapels_channel_and_closes_whole(sentinel):
    """Through a real Sentinel: the master is found, messages travel on Stapel's
    Sentinel channel, and Celery's close sequence after the master died raises nothing."""
    url, master_url = sentinel
    conn = Connection(
        url, transport=transport_for(url), transport_options={"master_name": "stapel"}
    )
    held = _queue("held")
    with conn.Producer() as producer:
        producer.publish({"n": 1}, exchange=held.exchange, routing_key="held", declare=[held])
    got: list = []
    channel = conn.channel()
    assert isinstance(channel, SentinelChannel)
    consumer = conn.Consumer([held], channel=channel, callbacks=[lambda _b, m: got.append(m)])
    consumer.qos(prefetch_count=0)
    consumer.consume()
    conn.drain_events(timeout=5)
    with pytest.raises(socket.timeout):
        conn.drain_events(timeout=0.2)  # leaves a BRPOP pending
    assert len(got) == 1 and channel._in_poll
    assert redis.Redis.from_url(master_url).hlen("unacked") == 1

    redis.Redis.from_url(master_url).shutdown(nosave=True)
    wait_for(lambda: not _answers(master_url), timeout=30, what="the master to be gone")
    try:
        conn.collect(socket_timeout=1)
    except Exception:  # Celery ignores anything collect raises too
        pass
    assert channel.closed
    channel.close()  # a later close is a no-op
    ignore_errors(conn, conn.close)
