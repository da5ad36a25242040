"""A model load longer than the heartbeat timeout costs its chunks no attempt.

The worker's loads take 8 s longer (its test hook, workers/faults.py) against a 3 s
heartbeat timeout. A chunk waiting for its model heartbeats meanwhile
(Engine.wait_loaded), so the watchdog requeues nothing; before, the first chunks of a
worker sat silent in the load and were requeued, each with an attempt used.
"""

from __future__ import annotations

import pytest

from tests.faults.harness import SHORT_ENV

pytestmark = [pytest.mark.fault, pytest.mark.slow]

SLOW_LOAD_S = 8.0


def test_a_slow_model_load_gets_no_chunk_requeued(make_stack, reference, report):
    assert 2 * float(SHORT_ENV["STAPEL_HEARTBEAT_TIMEOUT_S"]) < SLOW_LOAD_S
    stack = make_stack(chunk_segments=20)
    stack.start_beat()
    workers = stack.launch(
        ("watch", "control", 1, {}),  # the watchdog needs a slot the loads do not take
        ("slow", "cpu", 4, {"STAPEL_TEST_SLOW_LOAD_S": str(SLOW_LOAD_S)}),
    )
    ids = stack.submit([80, 40], seed=3)
    finished_at = stack.wait_done(ids)
    figures = stack.verify("slow_model_load", ids, reference)
    log = workers["slow"].full_log()
    chunks = [c for job_id in ids for c in stack.chunks(job_id)]
    figures.notes = {
        "load_extra_s": SLOW_LOAD_S,
        "chunks": len(chunks),
        "requeued": stack.logs().count("requeued stalled chunk"),
        "finished_at": round(finished_at, 2),
        "watchdog_passes": workers["watch"].full_log().count("watchdog found"),
    }
    report(figures)

    assert "every model load takes 8 s longer" in log
    assert figures.succeeded == len(ids)
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    assert figures.notes["watchdog_passes"] >= SLOW_LOAD_S  # it looked, every second
    assert figures.notes["requeued"] == 0
    assert [c.attempts for c in chunks] == [1] * len(chunks)


def test_a_unit_waiting_for_its_own_chunks_model_keeps_every_claim(make_stack, reference, report):
    """A task whose own chunk's model loads took chunks of a loaded model along: the
    unit waits for the load, and every claim in it heartbeats meanwhile (before, only
    the loading chunk's did, and the watchdog requeued the others)."""
    stack = make_stack()
    stack.start_beat()
    workers = stack.launch(
        ("watch", "control", 1, {}),
        # one task thread: the de-en message is the one delivered, the rest taken along
        ("slow", "cpu", 1, {"STAPEL_TEST_SLOW_LOAD_S": str(SLOW_LOAD_S)}),
    )
    slow = workers["slow"]
    stack.wait_done(stack.submit([1], seed=1))  # en-de loaded
    stack.celery.control.cancel_consumer("cpu", destination=[slow.name], reply=True)
    response = stack.client.post(
        "/v1/jobs",
        json={"source_lang": "de", "target_lang": "en", "segments": ["Guten Morgen."]},
        headers=stack.auth,
    )
    assert response.status_code == 202, response.get_json()
    de_en = response.get_json()["id"]
    ids = stack.submit([2] * 5, seed=2)  # behind it in the queue
    stack.celery.control.add_consumer("cpu", destination=[slow.name], reply=True)
    stack.wait_done([de_en, *ids])
    figures = stack.verify("slow_load_in_unit", ids, reference)
    log = slow.full_log()
    chunks = [c for job_id in [de_en, *ids] for c in stack.chunks(job_id)]
    figures.notes = {"requeued": stack.logs().count("requeued stalled chunk")}
    report(figures)

    assert "took along count=5" in log, "the en-de chunks were not taken along by the de-en task"
    assert stack.jobs([de_en])[de_en].status == "succeeded"
    assert figures.succeeded == len(ids)
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    assert figures.notes["requeued"] == 0
    assert [c.attempts for c in chunks] == [1] * len(chunks)
