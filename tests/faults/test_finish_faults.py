"""A job's end breaks between its last chunk's update and the job's: it ends anyway.

The worker's test hook (`STAPEL_TEST_FAULT`, workers/faults.py) fires at the UPDATE that
ends a job, inside the transaction that has just marked the job's last chunk succeeded:
- `finish-error`: that statement fails once (a lost connection): the transaction rolls
  back whole and the worker's DB retry runs it again;
- `finish-kill`: the worker is SIGKILLed there: nothing of the transaction lands, the
  chunk's heartbeat goes stale, another worker resumes it;
- `finish-commit-kill`: the worker commits the chunk, then dies: the split the review
  found (chunk succeeded, job running). The watchdog must end the job in one period.
A control-only worker runs the watchdog throughout, so a pass never waits on a start.
"""

from __future__ import annotations

import time

import pytest

from tests.factories import wait_for
from tests.faults.harness import DEADLINE_S, SHORT_ENV

pytestmark = [pytest.mark.fault, pytest.mark.slow]

WATCHDOG_S = float(SHORT_ENV["STAPEL_WATCHDOG_S"])
SCENARIOS = {"finish-kill": "kill_at_job_end", "finish-commit-kill": "kill_after_chunk_commit"}
HEARTBEAT_TIMEOUT_S = float(SHORT_ENV["STAPEL_HEARTBEAT_TIMEOUT_S"])


def faulty(stack, fault: str):
    """Beat, a watchdog-only worker and a translating worker with the fault hook."""
    stack.start_beat()
    stack.worker("control", queues="control")
    return stack.worker("faulty", concurrency=1, env={"STAPEL_TEST_FAULT": fault})


def test_an_error_at_the_job_update_is_retried_whole(make_stack, reference, report):
    stack = make_stack(chunk_segments=100)
    worker = faulty(stack, "finish-error")
    ids = stack.submit([200, 200, 100])
    started = time.monotonic()
    finished_at = stack.wait_done(ids)
    figures = stack.verify("error_at_job_end", ids, reference)
    log = worker.full_log()
    figures.recover_s = round(finished_at - started, 2)
    figures.notes = {
        "injected": log.count("test hook: finish-error at a job's end"),
        "db_retries": log.count("database unavailable, retrying"),
        "requeued": stack.logs().count("requeued stalled chunk"),
    }
    report(figures)

    assert figures.succeeded == len(ids), stack.logs()[-4000:]
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    assert figures.notes["injected"] == len(ids)  # every job's end failed once
    assert figures.attempts_max == 1 and figures.notes["requeued"] == 0


@pytest.mark.parametrize("fault", ["finish-kill", "finish-commit-kill"])
def test_a_worker_killed_at_the_job_update(fault, make_stack, reference, report):
    stack = make_stack(chunk_segments=100)
    victim = faulty(stack, fault)
    ids = stack.submit([200])
    wait_for(lambda: not victim.alive(), timeout=DEADLINE_S, what="the hook to kill the worker")
    killed_at = time.monotonic()
    (job,) = stack.jobs(ids).values()
    chunks = [c.status for c in stack.chunks(ids[0])]
    if fault == "finish-commit-kill":
        # the chunks committed, the job's end not: running, unless the watchdog's pass
        # (every second) ended it before this read; the log below says which ended it
        assert chunks == ["succeeded", "succeeded"] and job.status in ("running", "succeeded")
        finished_at = stack.wait_done(ids)  # the watchdog alone: no translating worker
    else:
        assert (job.status, chunks) == ("running", ["succeeded", "running"])
        stack.worker("rescuer")
        finished_at = stack.wait_done(ids)
    figures = stack.verify(SCENARIOS[fault], ids, reference)
    figures.recover_s = round(finished_at - killed_at, 2)
    figures.notes = {
        "state_at_kill": {"job": job.status, "chunks": chunks},
        "watchdog_s": WATCHDOG_S,
        "heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S,
        "ended_by_watchdog": f"watchdog ended a job whose chunks had all ended logid={ids[0]}"
        in stack.logs(),
    }
    report(figures)

    assert figures.succeeded == 1, stack.logs()[-4000:]
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    if fault == "finish-commit-kill":
        # one watchdog period (1 s), with slack for a busy 2-core machine
        assert figures.notes["ended_by_watchdog"] and figures.recover_s < WATCHDOG_S + 5
    else:
        assert stack.chunks(ids[0])[1].attempts == 2  # resumed after the stale heartbeat
