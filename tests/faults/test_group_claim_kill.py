"""A worker dies between a group's claim and its commit: nothing is lost or written twice.

A worker's committer claims the chunks its tasks wait on in one transaction
(workers/committer.py). The test hook (`STAPEL_TEST_FAULT=claim-kill`,
workers/faults.py) SIGKILLs the worker right after the UPDATE that claims a group of two
or more chunks, before that transaction commits: the claims never land, the chunks stay
`queued`, and the group's messages sit delivered and unacknowledged in Redis. The
watchdog sends them again; a second worker translates every job once.
"""

from __future__ import annotations

import time

import pytest

from tests.faults.harness import killed_by_hook

pytestmark = [pytest.mark.fault, pytest.mark.slow]

JOBS = 24
"""One-segment jobs queued before the worker starts: its tasks claim them in groups."""


def test_a_worker_killed_inside_a_group_claim_loses_nothing(make_stack, reference, report):
    stack = make_stack()
    ids = stack.submit([1] * JOBS)  # no worker yet: every message waits in Redis
    killed_by_hook(stack, "claim-kill", "claim-kill in a group's claim", concurrency=16)
    killed_at = time.monotonic()
    at_kill = {job.status for job in stack.jobs(ids).values()}

    stack.start("rescuer")  # beat (the watchdog) and a worker without the hook
    finished_at = stack.wait_done(ids)
    figures = stack.verify("kill_inside_group_claim", ids, reference)
    figures.recover_s = round(finished_at - killed_at, 2)
    figures.notes = {"job_states_at_kill": sorted(at_kill)}
    report(figures)

    assert figures.succeeded == len(ids), stack.logs()[-4000:]
    assert (figures.lost, figures.wrong, figures.duplicated, figures.stuck) == (0, 0, 0, 0)
