"""Jobs arriving one by one are taken along when the worker's consumer pauses.

After Celery delivers a small chunk's message, the worker's consumer sends its next
BRPOP only STAPEL_CONSUME_PAUSE_MS later (workers/takealong.py `pace_consumer`): what
arrives meanwhile waits in the queue, and the next delivered task takes it along in one
round trip. Here the pause is long (3 s), so jobs posted one after another to a worker
that just delivered one are taken along together; with no pause Celery delivers each
as it arrives and its task finds nothing behind it.
"""

from __future__ import annotations

import pytest

from tests.faults.harness import Reference

pytestmark = [pytest.mark.fault, pytest.mark.slow]

PAUSE_MS = 3000
ARRIVING = 6


def test_jobs_arriving_during_the_pause_are_taken_along(make_stack, model_root, report):
    stack = make_stack()
    worker = stack.worker("w", concurrency=4, env={"STAPEL_CONSUME_PAUSE_MS": str(PAUSE_MS)})
    first = stack.submit([1], seed=0)
    stack.wait_done(first)  # delivered: the pause began then
    # posted one by one, well within a pause: this pause's or the one the first of them
    # starts when the first job's pause had ended before they came
    arriving = stack.submit([1] * ARRIVING, seed=1)
    stack.wait_done(arriving)

    figures = stack.verify("consumer_pace", first + arriving, Reference(model_root))
    log = worker.full_log()
    taken = [
        int(line.split("took along count=")[1].split()[0])
        for line in log.splitlines()
        if "took along count=" in line
    ]
    figures.notes = {"takes": taken}
    report(figures)

    assert sum(taken) >= ARRIVING - 2, (taken, stack.diagnosis())
    assert figures.succeeded == 1 + ARRIVING, stack.diagnosis()
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    assert figures.attempts_max == 1
