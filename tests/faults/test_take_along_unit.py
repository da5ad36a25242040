"""A chunk that fails inside a take-along unit fails alone; the unit's others succeed.

A task runs the chunks it took along as one unit (workers/pipeline.py `run_taken`: one
claim request, their steps together, one finish request). Here the queue holds one-
segment en-de jobs with de-en jobs between them, and the worker's de-en model is broken
(a garbage `model.bin`, found at start: the pair is refused): a unit that holds de-en
chunks must end each one's job with the clear "no worker can load" error inside the unit
and translate every en-de job once, as separate tasks would have.
"""

from __future__ import annotations

import pytest

from tests.factories import sentences
from tests.faults.harness import Reference, broken_copy

pytestmark = [pytest.mark.fault, pytest.mark.slow]

JOBS = 24
EVERY = 4
"""Every EVERY-th job is de-en."""


@pytest.fixture
def de_en_broken(model_root, tmp_path):
    return broken_copy(model_root, tmp_path / "de-en-broken", "de-en", "model.bin")


def test_a_failing_chunk_in_a_taken_unit_fails_alone(make_stack, de_en_broken, model_root, report):
    stack = make_stack()
    good, broken = [], []
    for n in range(JOBS):  # no worker yet: every message waits in Redis
        if n % EVERY == EVERY - 1:
            response = stack.client.post(
                "/v1/jobs",
                json={"source_lang": "de", "target_lang": "en", "segments": sentences(1, n)},
                headers=stack.auth,
            )
            assert response.status_code == 202, response.get_json()
            broken.append(response.get_json()["id"])
        else:
            good += stack.submit([1], seed=n)
    worker = stack.worker("w", concurrency=2, env={"STAPEL_MODEL_ROOT": str(de_en_broken)})
    stack.wait_done(good + broken)

    figures = stack.verify(
        "failing_chunk_in_taken_unit",
        good + broken,
        Reference(model_root),
        expect=dict.fromkeys(broken, "failed"),
    )
    log = worker.full_log()
    figures.notes = {"takes": log.count("took along count=")}
    report(figures)

    assert "took along count=" in log, "nothing was taken along: no unit was tested"
    assert figures.succeeded == len(good) and figures.failed == len(broken), stack.diagnosis()
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    assert figures.attempts_max == 1
    for job in stack.jobs(broken).values():
        assert "no worker of pool cpu can load the model for de-en" in job.error
