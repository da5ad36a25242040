"""Cancels and the watchdog's poison path race the batch writes of sibling chunks.

Each round runs one job of 12 chunks on two workers of 3 tasks each, so six chunks of
the job write batches at once. Once two of them have written, the job is ended under
them, in turns:
- cancel: the tenant cancels it over the API;
- poison: one of its unfinished chunks (a queued one while any is left: on a busy
  machine all may have been taken) becomes a running chunk whose worker is gone and
  whose attempts are used up, so the next watchdog pass fails it and the job, stopping
  the siblings mid-write.
Before one lock order, a sibling's write (chunk, then job) against these (job, then
chunks) ended in `deadlock detected` on PostgreSQL: a stuck job, or a cancel answering
503. The database's own deadlock counter is read before and after.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, text, update

from stapel.tables import Chunk, new_id, utcnow
from tests.factories import wait_for
from tests.faults.harness import DEADLINE_S, SHORT_ENV

pytestmark = [pytest.mark.fault, pytest.mark.slow]

ROUNDS = 10
CHUNKS, CHUNK_SEGMENTS = 12, 150


def server_deadlocks(stack) -> int | None:
    """Deadlocks PostgreSQL detected in this database so far (None on SQLite)."""
    with stack.sessions() as s:
        if s.get_bind().dialect.name != "postgresql":
            return None
        return s.scalar(
            text("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        )


def writing(stack, job_id) -> bool:
    return sum(c.status == "running" and c.done > 0 for c in stack.chunks(job_id)) >= 2


def poison(stack, job_id: str) -> bool:
    """Turn an unfinished chunk of the job (a queued one while any is left) into a stale
    running one with no attempts left; a chunk taken from under its worker stops it."""
    with stack.sessions() as s:
        for status in ("queued", "running"):
            for chunk_id in s.scalars(
                select(Chunk.id).where(Chunk.job_id == job_id, Chunk.status == status)
            ):
                won = s.execute(
                    update(Chunk)
                    .where(Chunk.id == chunk_id, Chunk.status == status)
                    .values(
                        status="running",
                        claim_token=new_id(),
                        worker="ghost@gone",
                        attempts=int(SHORT_ENV["STAPEL_MAX_ATTEMPTS"]),
                        heartbeat_at=utcnow() - timedelta(hours=1),
                    )
                ).rowcount
                s.commit()
                if won:
                    return True
    return False


def test_cancel_and_poison_race_sibling_writes(make_stack, reference, report):
    stack = make_stack(chunk_segments=CHUNK_SEGMENTS)
    stack.start("a", "b", concurrency=3)
    before = server_deadlocks(stack)
    ids, expect, answers, poisoned = [], {}, [], 0
    for round_ in range(ROUNDS):
        (job_id,) = stack.submit([CHUNKS * CHUNK_SEGMENTS], seed=round_)
        ids.append(job_id)
        wait_for(
            lambda job_id=job_id: writing(stack, job_id),
            timeout=DEADLINE_S,
            interval=0.02,
            what="two chunks of the job to write",
        )
        if round_ % 2:
            poisoned += poison(stack, job_id)
            expect[job_id] = "failed"
        else:
            cancel = stack.client.post(f"/v1/jobs/{job_id}/cancel", headers=stack.auth)
            answers.append(cancel.status_code)
            expect[job_id] = "cancelled"
        stack.wait_done([job_id])
    after = server_deadlocks(stack)
    figures = stack.verify("cancel_and_poison_race_writes", ids, reference, expect=expect)
    logs = stack.logs()
    states = {job_id: job.status for job_id, job in stack.jobs(ids).items()}
    figures.notes = {
        "rounds": ROUNDS,
        "cancel_answers": sorted(set(answers)),
        "poisoned": poisoned,
        "deadlocks_detected_by_server": None if before is None else after - before,
        "deadlocks_in_logs": logs.count("deadlock detected"),
        "conflict_retries": logs.count("lock conflict, retrying"),
        "db_retries": logs.count("database unavailable, retrying"),
    }
    report(figures)

    assert states == expect, stack.logs()[-4000:]
    assert answers == [200] * (ROUNDS // 2) and poisoned == ROUNDS // 2
    assert figures.notes["deadlocks_in_logs"] == 0
    assert figures.notes["deadlocks_detected_by_server"] in (None, 0)
    assert figures.duplicated == 0
