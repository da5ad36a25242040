"""Workers whose clocks run 120 s behind and 120 s ahead: no false alarm, no missed death.

Each worker's clock is shifted by its test hook (`STAPEL_TEST_CLOCK_SKEW_S`, workers/faults.py),
not the machine's. Two translating workers run 120 s behind and 120 s ahead; the watchdog
runs on a control worker of its own, first one ahead (it would take every heartbeat of the
host behind for stale), then one behind (it would take the heartbeats of the host ahead
for fresh long after that host died). Heartbeats, sends and leases are written and
compared with the database's clock, so a healthy worker behind must not be requeued (it
was, every pass, until its job failed after 3 attempts) and a dead worker ahead must be
noticed after the heartbeat timeout, not 120 s later. For the second part the worker
behind stops first, so the one ahead takes the doomed job alone (with two idle workers,
which one takes a chunk is the broker's choice); a new worker behind finishes it.
"""

from __future__ import annotations

import time

import pytest

from tests.factories import wait_for
from tests.faults.harness import DEADLINE_S, SHORT_ENV

pytestmark = [pytest.mark.fault, pytest.mark.slow]

SKEW_S = 120
HEARTBEAT_TIMEOUT_S = float(SHORT_ENV["STAPEL_HEARTBEAT_TIMEOUT_S"])
WATCHDOG_S = float(SHORT_ENV["STAPEL_WATCHDOG_S"])


def skewed(seconds: int) -> dict:
    return {"STAPEL_TEST_CLOCK_SKEW_S": str(seconds)}


ONE_CHUNK = {"STAPEL_WORKER_SEGMENTS": "300"}
"""Room for one 300-segment chunk per worker, so the healthy jobs' chunks spread over both."""


def test_skewed_clocks_cause_no_requeue_and_hide_no_death(make_stack, reference, report):
    stack = make_stack(chunk_segments=300)
    stack.start_beat()
    workers = stack.launch(
        ("watch-ahead", "control", 1, skewed(SKEW_S)),
        ("behind", "cpu", 1, {**skewed(-SKEW_S), **ONE_CHUNK}),
        ("ahead", "cpu", 1, {**skewed(SKEW_S), **ONE_CHUNK}),
    )
    ahead = workers["ahead"]
    healthy = stack.submit([600, 600], seed=1)
    healthy_started = time.monotonic()
    stack.wait_done(healthy)
    healthy_s = time.monotonic() - healthy_started
    requeued_while_healthy = stack.logs().count("requeued stalled chunk")
    workers["watch-ahead"].close()
    workers["watch-behind"] = stack.worker(
        "watch-behind", concurrency=1, env=skewed(-SKEW_S), queues="control"
    )

    # The worker ahead alone takes the doomed job (which of two idle workers takes a
    # chunk is the broker's choice) and dies in the middle of a chunk.
    workers["behind"].close()
    doomed = stack.submit([600], seed=5)
    chunk = wait_for(
        lambda: stack.running_on(doomed[0]),
        timeout=DEADLINE_S,
        interval=0.05,
        what="the worker ahead to write segments",
    )
    assert chunk.worker == ahead.name
    ahead.kill()
    killed_at = time.monotonic()
    wait_for(
        lambda: next(c for c in stack.chunks(chunk.job_id) if c.id == chunk.id).status == "queued",
        timeout=DEADLINE_S,
        interval=0.05,
        what="the dead worker's chunk to be requeued",
    )
    noticed_s = time.monotonic() - killed_at
    workers["behind-2"] = stack.worker(
        "behind-2", concurrency=1, env={**skewed(-SKEW_S), **ONE_CHUNK}, queues="cpu"
    )
    finished_at = stack.wait_done(doomed)
    requeued = next(c for c in stack.chunks(chunk.job_id) if c.id == chunk.id)
    ids = healthy + doomed
    figures = stack.verify("clock_skew_120s", ids, reference)
    figures.recover_s = round(finished_at - killed_at, 2)
    figures.notes = {
        "skew_s": [-SKEW_S, SKEW_S],
        "healthy_jobs_s": round(healthy_s, 2),
        "requeued_while_healthy": requeued_while_healthy,
        "death_noticed_s": round(noticed_s, 2),
        "heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S,
        "watchdog_passes": {
            name: proc.full_log().count("watchdog found") for name, proc in workers.items()
        },
    }
    report(figures)

    assert figures.succeeded == len(ids), stack.logs()[-4000:]
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    assert requeued_while_healthy == 0
    assert requeued.attempts == 2 and requeued.worker == workers["behind-2"].name
    assert figures.notes["watchdog_passes"]["watch-ahead"] > 0
    assert figures.notes["watchdog_passes"]["watch-behind"] > 0
    # the heartbeat timeout and a pass, with slack for a busy machine: far below the skew
    assert noticed_s < HEARTBEAT_TIMEOUT_S + WATCHDOG_S + 20 < SKEW_S
