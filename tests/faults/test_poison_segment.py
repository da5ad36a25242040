"""A segment that makes translate_batch raise hurts nobody in its shared batch.

Four tenants' jobs wait in Redis; one worker starts and merges them into shared batches.
One job holds a poison segment: a sentence of 1,100 tokens, over the tiny model's 1,024
positions, let through because the worker is told the model takes 4,096
(STAPEL_MAX_INPUT_TOKENS: a model whose stated limit is wrong). The other segments are
nearly as long, so the length-sorted batch takes them together with it. The batch is
bisected: every other segment is delivered, the poison fails alone. The other tenants'
jobs succeed with attempts 1 and the output of a clean run; the poison job succeeds
with one failed segment and its error; one log line tells of the failed batch.
"""

from __future__ import annotations

import re
import time

import pytest

from stapel.keys import create_key
from tests.factories import sentences
from tests.faults.harness import Reference

pytestmark = [pytest.mark.fault, pytest.mark.slow]

POISON = "ba " * 550
ENV = {
    "STAPEL_MAX_INPUT_TOKENS": "4096",
    "STAPEL_BATCH_TOKENS": "300000",  # a batch of up to 37k padded tokens when work runs out
    "STAPEL_BATCH_MEMORY_TOKENS": "0",  # and no bound on its rows: all four jobs in it
    "STAPEL_BATCH_WAIT_MS": "1000",
}


def long_segments(n: int, tenant: int) -> list[str]:
    """Segments of about 970-1,000 tokens, within the model's limit."""
    return [f"segment {tenant} {'ke ' * (482 + 3 * i)}" for i in range(n)]


def post(stack, auth: dict, texts: list[str]) -> str:
    response = stack.client.post(
        "/v1/jobs",
        json={"source_lang": "en", "target_lang": "de", "segments": texts},
        headers=auth,
    )
    assert response.status_code == 202, response.get_json()
    job_id = response.get_json()["id"]
    stack.texts[job_id] = texts
    return job_id


def test_a_poison_segment_fails_alone_beside_three_other_tenants(make_stack, model_root, report):
    stack = make_stack(env=ENV)
    with stack.app.extensions["stapel"].sessions() as s:
        keys = [{"Authorization": f"Bearer {create_key(s, f't{n}')[1]}"} for n in range(3)]
    others = [
        post(stack, key, long_segments(3, n) + sentences(5, seed=n)) for n, key in enumerate(keys)
    ]
    poison_texts = [*long_segments(2, 9), POISON, *sentences(3, seed=9)]
    poison = post(stack, stack.auth, poison_texts)
    started_at = time.monotonic()
    (worker,) = stack.start("w0", concurrency=4)
    finished_at = stack.wait_done([*others, poison])

    figures = stack.verify("poison_segment", others, Reference(model_root))
    jobs = stack.jobs([*others, poison])
    assert all(jobs[j].status == "succeeded" and jobs[j].attempts == 1 for j in others)
    assert all(jobs[j].segments_failed == 0 for j in others)
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)

    bad = jobs[poison]
    assert (bad.status, bad.attempts, bad.segments_failed) == ("succeeded", 1, 1)
    result = stack.client.get(f"/v1/jobs/{poison}/result", headers=stack.auth).get_json()
    (document,) = result["documents"]
    assert document["segments"][2] is None
    (error,) = document["errors"]
    assert (error["segment"], error["code"]) == (2, "input_too_long")
    assert not any(j in error["message"] for j in others)
    expected = Reference(model_root).translate(poison_texts)
    assert [t for i, t in enumerate(document["segments"]) if i != 2] == [
        t for i, t in enumerate(expected) if i != 2
    ]

    log = worker.full_log()
    failed = [line for line in log.splitlines() if "batch failed" in line]
    assert len(failed) == 1, failed
    held = re.search(r"logids=(\S+)", failed[0]).group(1).split(",")
    assert poison in held and any(j in held for j in others), "the poison shared no batch"
    assert f"failed_logids={poison} " in failed[0]
    assert "Traceback" not in log

    figures.submitted, figures.succeeded = 4, sum(j.status == "succeeded" for j in jobs.values())
    figures.segments += len(poison_texts)
    figures.attempts_max = max(j.attempts for j in jobs.values())
    figures.claims = len(re.findall(r"chunk claimed logid=", log))
    figures.recover_s = round(finished_at - started_at, 2)
    figures.notes = {
        "segments_failed": bad.segments_failed,
        "jobs_in_failed_batch": len(held),
        "error": error["message"],
    }
    report(figures)
