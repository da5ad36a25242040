"""Cancel and a lost claim take a chunk's waiting segments out of the batcher at once.

One worker translates a 1,200-segment job in small batches (64 tokens). Mid-run the job
is cancelled (the web announces it on Redis and the worker withdraws the job's waiting
segments at once), or its claim is lost (the watchdog's requeue, played by the test
with the same UPDATE; the task notices at its next write and withdraws). At most one
more batch of it is translated after the withdrawal, a probe job sent then runs, and
the worker's presence shows nothing held: the budget came back once. A lost claim's
chunk is then resumed by a new claim and its job succeeds with nothing written twice.
"""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import func, select, update

from stapel.presence import presence_key
from stapel.tables import Chunk, Segment
from tests.factories import wait_for
from tests.faults.harness import DEADLINE_S, Reference

pytestmark = [pytest.mark.fault, pytest.mark.slow]

BIG = 1200
BATCH = re.compile(r"batch model=en-de segments=(\d+) jobs=\d+ logids=(\S+)")


def translated_for(log: str, job_id: str) -> list[int]:
    """Segments of each batch that held job_id, in log order (one line per batch)."""
    return [int(n) for n, ids in BATCH.findall(log) if job_id in ids.split(",")]


def written(stack, job_id: str) -> int:
    with stack.sessions() as s:
        return s.scalar(
            select(func.count())
            .select_from(Segment)
            .where(Segment.job_id == job_id, Segment.target.is_not(None))
        )


def lose_claim(stack, job_id: str) -> None:
    """What the watchdog does to a chunk it thinks lost: back to queued, claim gone."""
    with stack.sessions() as s:
        s.execute(
            update(Chunk)
            .where(Chunk.job_id == job_id, Chunk.status == "running")
            .values(status="queued", claim_token=None, sent_at=None)
        )
        s.commit()


@pytest.mark.parametrize("stop", ["cancel", "lost_claim"])
def test_a_stopped_chunk_leaves_the_batcher_within_one_batch(make_stack, model_root, report, stop):
    # each batch 20 ms slower: on a fast machine the tiny model ends the job before the
    # test can stop it mid-run (nothing left to withdraw, which is no test of withdrawal)
    stack = make_stack(env={"STAPEL_LOG_LEVEL": "DEBUG", "STAPEL_TEST_SLOW_BATCH_S": "0.02"})
    (worker,) = stack.start("w0", concurrency=2)
    (big,) = stack.submit([BIG])
    wait_for(
        lambda: stack.jobs([big])[big].segments_done >= 100,
        timeout=DEADLINE_S,
        interval=0.02,
        what="the big job to be under way",
    )
    if stop == "cancel":
        response = stack.client.post(f"/v1/jobs/{big}/cancel", headers=stack.auth)
        assert response.status_code == 200
    else:
        lose_claim(stack, big)
    wait_for(
        lambda: f"chunk stopped: cancelled or requeued logid={big}" in worker.full_log(),
        timeout=DEADLINE_S,
        what="the task to notice",
    )
    (probe,) = stack.submit([30], seed=5)
    stack.wait_done([probe] if stop == "cancel" else [probe, big])

    log = worker.full_log()
    withdrawn = re.search(rf"withdrawn from batcher model=en-de logid={big} pieces=(\d+)", log)
    assert withdrawn and int(withdrawn.group(1)) > 0, "nothing was waiting: nothing tested"
    after = log[withdrawn.end() :].split("chunk claimed", 1)[0]  # a lost claim is resumed
    late = translated_for(after, big)
    assert len(late) <= 1, f"{len(late)} batches of the stopped chunk after its withdrawal"
    translated = sum(translated_for(log[: withdrawn.start()], big)) + sum(late)
    if stop == "cancel":
        assert translated < BIG - int(withdrawn.group(1)) + 1
        assert written(stack, big) <= translated
    client = stack.app.extensions["stapel"].redis
    wait_for(
        lambda: (
            (raw := client.get(presence_key(worker.name)))
            and json.loads(raw)["held"] == 0
            and json.loads(raw)["busy"] == 0
        ),
        timeout=DEADLINE_S,
        what="the worker's budget to be all returned",
    )
    ids = [probe] if stop == "cancel" else [probe, big]
    figures = stack.verify(f"{stop}_withdraws", ids, Reference(model_root))
    figures.notes = {
        "withdrawn_pieces": int(withdrawn.group(1)),
        "batches_after_withdrawal": len(late),
        "translated_of_stopped_chunk": translated,
    }
    report(figures)
    assert figures.succeeded == len(ids) and (figures.lost, figures.wrong) == (0, 0)
    assert figures.duplicated == 0
