"""A chunk that kills its worker every time fails its job after STAPEL_MAX_ATTEMPTS.

The "poison" is played by the test: whenever a worker logs that it claimed the poison
job's chunk, the test SIGKILLs it and starts a fresh worker, as an orchestrator would
restart a crashed pod. The watchdog must give up after the last attempt instead of
requeueing forever, and the other jobs of the batch must still succeed.
"""

from __future__ import annotations

import time

import pytest

from tests.factories import wait_for
from tests.faults.harness import DEADLINE_S, SHORT_ENV

pytestmark = [pytest.mark.fault, pytest.mark.slow]


def test_chunk_that_kills_its_worker_fails_after_max_attempts(make_stack, reference, report):
    max_attempts = int(SHORT_ENV["STAPEL_MAX_ATTEMPTS"])
    stack = make_stack()
    (current,) = stack.start("w0", concurrency=1)
    poison, *others = stack.submit([1000, 150, 150, 150])
    started_at = time.monotonic()
    kills = 0

    def claimed_or_failed():
        if stack.jobs([poison])[poison].status == "failed":
            return "failed"
        return "claimed" if f"chunk claimed logid={poison} " in current.full_log() else None

    while (
        wait_for(
            claimed_or_failed,
            timeout=DEADLINE_S,
            interval=0.05,
            what="the poison chunk to be claimed or its job to fail",
        )
        == "claimed"
    ):
        current.kill()
        kills += 1
        assert kills <= max_attempts, "the poison chunk was handed out again after the limit"
        current = stack.worker(f"w{kills}", concurrency=1)

    finished_at = stack.wait_done([poison, *others])
    figures = stack.verify("poison_chunk", [poison, *others], reference, expect={poison: "failed"})
    figures.recover_s = round(finished_at - started_at, 2)
    job = stack.jobs([poison])[poison]
    figures.notes = {"worker_kills": kills, "max_attempts": max_attempts, "error": job.error}
    report(figures)

    assert kills == max_attempts and job.attempts == max_attempts
    assert f"giving up after {max_attempts} attempts" in job.error
    assert figures.failed == 1 and figures.succeeded == len(others), stack.logs()[-4000:]
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    assert {c.status for c in stack.chunks(poison)} == {"failed"}
