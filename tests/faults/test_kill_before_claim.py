"""A worker dies after Redis delivered it a chunk's task but before it claimed the chunk.

The worker takes the message (it moves to Redis's `unacked` hash) and blocks on its claim
(the test holds a lock on the chunk rows), then is SIGKILLed. The chunk is still
`queued` in the DB, so the heartbeat path does not apply; the watchdog must see that the
message will never be worked on and send the chunk again.
"""

from __future__ import annotations

import json
import time

import pytest
import redis as redis_lib
from sqlalchemy import update

from stapel.broker import send_chunk
from stapel.dispatch import ChunkMessage
from stapel.tables import Chunk, new_id, utcnow
from tests.factories import wait_for
from tests.faults.harness import DEADLINE_S

pytestmark = [pytest.mark.fault, pytest.mark.slow]

RECOVERY_DEADLINE_S = 12
"""Grace (1 s) plus a watchdog period (1 s), with ample slack for a busy machine."""


UNACKED_KEY = "unacked"
"""kombu's Redis transport keeps delivered, unacknowledged messages in this hash."""


def delivered(client: redis_lib.Redis) -> set[str]:
    """Task ids of messages delivered to a consumer and not acknowledged."""
    return {json.loads(raw)[0]["headers"]["id"] for raw in client.hvals(UNACKED_KEY)}


def test_worker_killed_between_delivery_and_claim(
    make_stack, fault_engine, reference, report, monkeypatch
):
    stack = make_stack()
    (first,) = stack.start("a", concurrency=1, beat=False)
    monkeypatch.setattr("stapel.dispatch.send_chunk", lambda *_args, **_kwargs: False)
    ids = stack.submit([100, 100, 100])
    client = redis_lib.Redis.from_url(stack.redis_url)
    with fault_engine.connect() as conn:
        lock = conn.begin()
        task_ids = {}
        for job_id in ids:  # record the send under a lock the worker's claim waits for
            (chunk,) = stack.chunks(job_id)
            task_ids[job_id] = new_id()
            conn.execute(
                update(Chunk)
                .where(Chunk.id == chunk.id)
                .values(task_id=task_ids[job_id], sent_at=utcnow())
            )
            assert send_chunk(
                stack.celery,
                ChunkMessage(
                    chunk.id, job_id, "cpu", 5, "cpu", chunk.end_segment - chunk.first_segment
                ),
                task_ids[job_id],
            )
        taken = wait_for(
            lambda: delivered(client) & set(task_ids.values()),
            timeout=DEADLINE_S,
            what="the worker to take a message",
        )
        first.kill()
        killed_at = time.monotonic()
        lock.commit()
    client.close()

    stack.start("b")
    try:
        finished_at = stack.wait_done(ids, timeout=RECOVERY_DEADLINE_S)
    except AssertionError:
        finished_at = None
    figures = stack.verify("kill_between_delivery_and_claim", ids, reference)
    figures.recover_s = round(finished_at - killed_at, 2) if finished_at else None
    figures.notes = {
        "messages_taken_by_killed_worker": len(taken),
        "deadline_s": RECOVERY_DEADLINE_S,
    }
    report(figures)

    assert figures.succeeded == len(ids), stack.logs()[-3000:]
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
