"""SIGTERM to a busy worker: its running chunks finish before the process exits."""

from __future__ import annotations

import signal
import time

import pytest

from tests.factories import wait_for
from tests.faults.harness import DEADLINE_S

pytestmark = [pytest.mark.fault, pytest.mark.slow]


def test_sigterm_lets_running_jobs_finish(make_stack, reference, report):
    stack = make_stack()
    (first,) = stack.start("a")
    ids = stack.submit([1000, 1000, 150, 150])
    chunk = wait_for(
        lambda: stack.running_on(ids[0]) or stack.running_on(ids[1]),
        timeout=DEADLINE_S,
        interval=0.05,
        what="a big job to be running",
    )
    running = [j for j in ids[:2] if any(c.status == "running" for c in stack.chunks(j))]
    first.signal(signal.SIGTERM)
    term_at = time.monotonic()
    first.proc.wait(timeout=DEADLINE_S)
    exited_after = time.monotonic() - term_at

    at_exit = stack.jobs(running)
    assert {j.status for j in at_exit.values()} == {"succeeded"}, first.full_log()[-3000:]
    assert {j.attempts for j in at_exit.values()} == {1}

    stack.worker("b")  # the jobs the first worker never took
    finished_at = stack.wait_done(ids)
    figures = stack.verify("sigterm_busy_worker", ids, reference)
    figures.recover_s = round(finished_at - term_at, 2)
    figures.notes = {
        "running_at_sigterm": len(running),
        "exit_after_s": round(exited_after, 2),
        "segments_done_at_sigterm": chunk.done,
    }
    report(figures)

    assert figures.succeeded == len(ids), stack.logs()[-4000:]
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    assert figures.attempts_max == 1 and figures.claims == len(ids)
    assert "Warm shutdown" in first.full_log() or "warm shutdown" in first.full_log().lower()
