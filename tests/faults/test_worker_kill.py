"""A worker dies with SIGKILL mid-chunk: the watchdog requeues, another worker resumes."""

from __future__ import annotations

import re
import time

import pytest

from tests.factories import wait_for
from tests.faults.harness import DEADLINE_S

pytestmark = [pytest.mark.fault, pytest.mark.slow]

BIG, SMALL = 1500, 150


def test_sigkill_mid_job_is_resumed_on_another_worker(make_stack, reference, report):
    stack = make_stack()
    workers = stack.start("a", "b")
    ids = stack.submit([BIG, SMALL, SMALL, SMALL])
    big = ids[0]

    chunk = wait_for(
        lambda: stack.running_on(big),
        timeout=DEADLINE_S,
        interval=0.05,
        what="the big job to have written segments",
    )
    victim = next(w for w in workers if w.name == chunk.worker)
    victim.kill()
    killed_at = time.monotonic()
    done_before = stack.jobs([big])[big].segments_done

    finished_at = stack.wait_done(ids)
    figures = stack.verify("sigkill_worker", ids, reference)
    figures.recover_s = round(finished_at - killed_at, 2)
    figures.notes = {"segments_done_at_kill": done_before, "killed": victim.name}
    report(figures)

    assert figures.succeeded == len(ids), stack.logs()[-4000:]
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    (resumed,) = stack.chunks(big)
    assert resumed.attempts == 2 and resumed.worker != victim.name
    assert 0 < done_before < BIG, "the kill did not land mid-chunk"
    # the second attempt translated only what the first had not written (resume)
    survivor = next(w for w in workers if w is not victim)
    resumed_with = int(
        re.search(f"chunk done logid={big} chunk=0 segments=(\\d+)", survivor.full_log()).group(1)
    )
    figures.notes["segments_in_second_attempt"] = resumed_with
    report(figures)
    assert resumed_with <= BIG - done_before
