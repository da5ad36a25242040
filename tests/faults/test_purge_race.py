"""`jobs purge` races `jobs requeue` on the same ended jobs: each job goes whole or stays whole.

Forty cancelled jobs; two operator commands at once, each on its own connection: purge
(every ended job, one job per transaction) and requeue (the same jobs, in another
order). Purge chooses its jobs first and deletes them batch by batch, so requeues land
between its choice and its DELETE. Each DELETE checks the status again: a job requeued
meanwhile keeps every row and is translated once a worker starts; a job purged first
is gone entirely and its requeue answers "no job". (Before, purge deleted by id: a job
requeued meanwhile lost its rows while the operator had been told it was requeued.)
"""

from __future__ import annotations

import random
import threading

import pytest
from sqlalchemy import func, select

from stapel import admin
from stapel.exceptions import NotFound
from stapel.tables import Chunk, Document, Job, Segment

pytestmark = [pytest.mark.fault, pytest.mark.slow]

JOBS, SEGMENTS, CHUNK = 40, 20, 10


def rows(stack, job_id) -> tuple[int, int, int, int]:
    """(job, documents, chunks, segments) rows the job has."""
    with stack.sessions() as s:
        return tuple(
            s.scalar(select(func.count()).select_from(t).where(column == job_id))
            for t, column in (
                (Job, Job.id),
                (Document, Document.job_id),
                (Chunk, Chunk.job_id),
                (Segment, Segment.job_id),
            )
        )


def test_purge_racing_requeue(make_stack, reference, report, monkeypatch):
    stack = make_stack(chunk_segments=CHUNK, app_overrides={"rate_submit": "off"})
    ids = stack.submit([SEGMENTS] * JOBS)  # no worker yet: they wait, then are cancelled
    for job_id in ids:
        assert stack.client.post(f"/v1/jobs/{job_id}/cancel", headers=stack.auth).status_code == 200
    chosen: set[str] = set()
    real_batch = admin._purge_batch

    def batch(session, batch_ids, condition):
        chosen.update(batch_ids)
        return real_batch(session, batch_ids, condition)

    monkeypatch.setattr(admin, "_purge_batch", batch)
    start = threading.Barrier(2)
    purged: list[int] = []

    def purge() -> None:
        with stack.sessions() as s:
            start.wait()
            purged.append(admin.purge_jobs(s, 0, batch_segments=SEGMENTS))

    thread = threading.Thread(target=purge)
    thread.start()
    requeued, missing = [], []
    with stack.sessions() as s:
        start.wait()
        for job_id in random.Random(7).sample(ids, len(ids)):
            try:
                admin.requeue_job(s, stack.celery, set(), job_id)
                requeued.append(job_id)
            except NotFound:
                missing.append(job_id)
    thread.join(60)

    stack.start("w")
    stack.wait_done(requeued)
    figures = stack.verify("purge_racing_requeue", requeued, reference)
    saved = sorted(set(requeued) & chosen)  # chosen by purge, requeued before its DELETE
    figures.notes = {
        "jobs": JOBS,
        "purged": purged[0],
        "requeued": len(requeued),
        "requeue_found_nothing": len(missing),
        "kept_by_the_recheck": len(saved),
    }
    report(figures)

    assert purged[0] == len(missing) and len(requeued) + len(missing) == JOBS
    assert all(rows(stack, j) == (0, 0, 0, 0) for j in missing)
    whole = (1, 1, SEGMENTS // CHUNK, SEGMENTS)
    assert all(rows(stack, j) == whole for j in requeued)
    assert figures.succeeded == len(requeued), stack.logs()[-4000:]
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    assert purged[0] > 0 and requeued, "the two commands did not overlap"
