"""A worker whose model directory is broken hands its chunks to a healthy worker.

The broken worker's en-de `source.spm` is garbage (a failed sync): the directory looks
complete, and loading the model raises. Alone, the broken worker fails a job quickly and
clearly (no worker of the pool can load the model), instead of after three timeouts.
Beside a healthy worker, every job succeeds with attempts 1: the broken worker gives
each chunk back unclaimed, never joins the pair's model queue, and its presence record
and readiness say the pair is broken. Chunks it took along together are given back at
once and sent again after one pause: none of them waits, claimed, through the others'
pauses until the watchdog calls it stalled.
"""

from __future__ import annotations

import time

import pytest

from tests.factories import wait_for
from tests.faults.harness import DEADLINE_S, Reference, broken_copy
from tests.faults.procs import GroupWorker
from workers.runtime import ready

pytestmark = [pytest.mark.fault, pytest.mark.slow]


@pytest.fixture
def broken_root(model_root, tmp_path):
    return broken_copy(model_root, tmp_path / "broken-models", "en-de", "source.spm")


def test_a_broken_model_on_one_worker_is_that_workers_problem(
    make_stack, broken_root, model_root, report
):
    stack = make_stack()
    stack.start_beat()
    broken = GroupWorker(
        {**stack.env, "STAPEL_MODEL_ROOT": str(broken_root)},
        stack.log_dir,
        concurrency=4,
        name="broken",
    )
    stack.workers.append(broken)
    broken.start(stack.celery)

    # Alone: nobody can load en-de, so the job fails at once with the reason.
    (alone,) = stack.submit([20])
    started = time.monotonic()
    stack.wait_done([alone], timeout=30)
    failed_in = time.monotonic() - started
    job = stack.jobs([alone])[alone]
    assert job.status == "failed" and job.attempts == 0
    assert "no worker of pool cpu can load the model for en-de" in job.error

    healthy = stack.worker("healthy", concurrency=2)
    ids = stack.submit([60] * 8, seed=1)
    started = time.monotonic()
    finished_at = stack.wait_done(ids)
    figures = stack.verify("broken_model_one_worker", ids, Reference(model_root))
    figures.recover_s = round(finished_at - started, 2)
    log = broken.full_log()
    handed_back = log.count("chunk handed back: model unavailable here")
    figures.notes = {"handed_back": handed_back, "alone_failed_in_s": round(failed_in, 2)}
    report(figures)

    assert figures.succeeded == len(ids), stack.diagnosis()
    assert figures.attempts_max == 1 and (figures.lost, figures.wrong) == (0, 0)
    assert handed_back >= 1, "the broken worker never met a chunk: nothing was tested"
    assert "model broken pair=en-de" in log and "chunk done" not in log
    assert "joined model queue queue=cpu.en-de" not in log
    client = stack.app.extensions["stapel"].redis
    is_ready, why = wait_for(
        lambda: (r := ready(client, broken.name)) and "en-de" in r[1] and r,
        timeout=DEADLINE_S,
        what="the broken worker's presence to name en-de",
    )
    assert not is_ready and "broken models: en-de" in why
    assert ready(client, healthy.name) == (True, "ready")


def test_chunks_taken_together_are_given_back_together(make_stack, broken_root, model_root, report):
    stack = make_stack()
    stack.start_beat()
    # present in the pool (the broken worker must hand back, not fail) but taking nothing
    healthy = stack.worker("healthy", concurrency=2)
    stack.celery.control.cancel_consumer("cpu", destination=[healthy.name], reply=True)
    ids = stack.submit([20] * 6, seed=2)  # they wait in the pool's queue
    broken = stack.worker("broken", concurrency=2, env={"STAPEL_MODEL_ROOT": str(broken_root)})
    # twice: the second time the pair is known broken, so the chunks stay in their unit
    wait_for(
        lambda: (
            broken.full_log().count("chunk handed back: model unavailable here") >= 2 * len(ids)
        ),
        timeout=DEADLINE_S,
        what="the broken worker to give every chunk back twice",
    )
    stack.celery.control.add_consumer("cpu", destination=[healthy.name], reply=True)
    started = time.monotonic()
    finished_at = stack.wait_done(ids)
    figures = stack.verify("broken_model_unit_given_back", ids, Reference(model_root))
    figures.recover_s = round(finished_at - started, 2)
    log = broken.full_log()
    figures.notes = {"takes": log.count("took along count=")}
    report(figures)

    assert "took along count=" in log, "nothing was taken along: no unit was given back"
    assert figures.succeeded == len(ids), stack.diagnosis()
    # a claim that waited through the others' pauses was requeued by the watchdog: 2
    assert figures.attempts_max == 1
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    assert "chunk done" not in log
