"""A worker dies holding messages it took along: nothing is lost or written twice.

A chunk's task takes the small chunk messages waiting behind its own into Redis's
`unacked` hash (workers/takealong.py). The test hook (`STAPEL_TEST_FAULT=take-kill`,
workers/faults.py) SIGKILLs the worker right after a take of two or more, before any of
their chunks is claimed: the messages sit in `unacked`, their chunks `queued`. The
watchdog sends them again; a second worker translates every job once.
"""

from __future__ import annotations

import time

import pytest
import redis

from tests.faults.harness import killed_by_hook

pytestmark = [pytest.mark.fault, pytest.mark.slow]

JOBS = 24
"""One-segment jobs queued before the worker starts: its first task takes the rest along."""


def test_a_worker_killed_holding_taken_messages_loses_nothing(make_stack, reference, report):
    stack = make_stack()
    ids = stack.submit([1] * JOBS)  # no worker yet: every message waits in Redis
    killed_by_hook(stack, "take-kill", "take-kill after taking", concurrency=4)
    killed_at = time.monotonic()
    held = redis.Redis.from_url(stack.redis_url).hlen("unacked")
    assert held >= 2  # the taken messages wait delivered, unacknowledged

    stack.start("rescuer")  # beat (the watchdog) and a worker without the hook
    finished_at = stack.wait_done(ids)
    figures = stack.verify("kill_holding_taken_messages", ids, reference)
    figures.recover_s = round(finished_at - killed_at, 2)
    figures.notes = {"unacked_at_kill": held}
    report(figures)

    assert figures.succeeded == len(ids), stack.logs()[-4000:]
    assert (figures.lost, figures.wrong, figures.duplicated, figures.stuck) == (0, 0, 0, 0)
