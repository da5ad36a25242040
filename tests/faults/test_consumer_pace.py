"""Jobs arriving one by one are taken along when the worker's consumer pauses.

After Celery delivers a small chunk's message, the worker's consumer asks only for
Redis's first level (the interactive lane, priority 9) for STAPEL_CONSUME_PAUSE_MS
(workers/takealong.py `pace_consumer`): what arrives meanwhile at other levels waits in
the queue, and the next delivered task takes it along in one round trip. Here the
pause is long (3 s), so jobs posted one after another to a worker that just delivered
one are taken along together; with no pause Celery delivers each as it arrives and its
task finds nothing behind it.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from stapel.tables import Job
from tests.factories import sentences
from tests.faults.harness import Reference

pytestmark = [pytest.mark.fault, pytest.mark.slow]

PAUSE_MS = 3000
ARRIVING = 6
ENDLESS_PAUSE_MS = 600_000
"""Longer than the test: a message held until this pause ends would never come."""


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


def test_the_interactive_lane_is_delivered_during_a_pause(make_stack, model_root, report):
    """During a pause the consumer still asks for Redis's first level, where the
    interactive lane's messages wait: a compat request is answered while the pause goes
    on (held to its end, it would time out first). A warm shutdown inside the pause ends
    the first-level BRPOP instead of waiting for its timeout."""
    stack = make_stack()
    worker = stack.worker(
        "w", concurrency=4, env={"STAPEL_CONSUME_PAUSE_MS": str(ENDLESS_PAUSE_MS)}
    )
    first = stack.submit([1], seed=0)
    stack.wait_done(first)  # delivered: the pause began then
    texts = sentences(2, seed=1)
    answer = stack.client.post(
        "/libretranslate/translate",
        json={
            "q": texts,
            "source": "en",
            "target": "de",
            "api_key": stack.auth["Authorization"].split()[1],
        },
    )
    assert answer.status_code == 200, (answer.get_json(), stack.diagnosis())
    with stack.sessions() as s:
        (lane,) = s.scalars(select(Job.id).where(Job.api == "libretranslate")).all()
    stack.texts[lane] = texts

    figures = stack.verify("consumer_pace_lane", [*first, lane], Reference(model_root))
    report(figures)
    reference = Reference(model_root).translate(texts)
    assert answer.get_json()["translatedText"] == reference
    assert figures.succeeded == 2, stack.diagnosis()
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)

    worker.close()  # SIGTERM, then SIGKILL if it has not exited 15 s later
    assert worker.proc.returncode == 0, worker.full_log()[-3000:]
