"""Purge: short batches, the status checked again in the DELETE, pending callbacks kept."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from stapel import admin
from stapel.tables import Chunk, Document, Job, Segment, utcnow
from tests.stapel.test_jobs import make_job


def ended(session, *, days_ago=2.0, n=3, callback=None, status="succeeded"):
    _, job = make_job(session, n=n, chunk=2)
    session.execute(
        update(Job)
        .where(Job.id == job.id)
        .values(
            status=status,
            finished_at=utcnow() - timedelta(days=days_ago),
            callback_status=callback,
        )
    )
    session.commit()
    return job.id


def rows_of(session, job_id) -> int:
    return sum(
        session.scalar(select(func.count()).select_from(t).where(t.job_id == job_id))
        for t in (Segment, Document, Chunk)
    ) + session.scalar(select(func.count()).select_from(Job).where(Job.id == job_id))


@pytest.mark.parametrize(
    ("sizes", "limit", "expected"),
    [
        ([3, 3, 3], 4, [["a"], ["b"], ["c"]]),
        ([1, 2, 1, 5], 4, [["a", "b", "c"], ["d"]]),
        ([10], 4, [["a"]]),  # a job larger than a batch goes alone
        ([2, 2], 100, [["a", "b"]]),
    ],
)
def test_batches_are_bounded_by_segments(sizes, limit, expected):
    rows = list(zip("abcd", sizes, strict=False))
    assert admin._batches(rows, limit) == expected


def test_purge_deletes_old_ended_jobs_in_batches(any_session):
    old = [ended(any_session) for _ in range(4)]
    fresh = ended(any_session, days_ago=0.5)
    running = make_job(any_session)[1].id
    assert admin.purge_jobs(any_session, 1, batch_segments=4) == 4
    assert [rows_of(any_session, j) for j in old] == [0, 0, 0, 0]
    assert rows_of(any_session, fresh) > 0 and rows_of(any_session, running) > 0


def test_a_job_requeued_before_the_delete_keeps_all_its_rows(any_session):
    gone, requeued = ended(any_session), ended(any_session)
    condition = admin.purgeable(1, 600)
    before = rows_of(any_session, requeued)
    # the operator's requeue lands after purge chose its batch, before the batch runs
    any_session.execute(update(Job).where(Job.id == requeued).values(status="queued"))
    any_session.commit()
    assert admin._purge_batch(any_session, [gone, requeued], condition) == 1
    assert rows_of(any_session, gone) == 0
    assert rows_of(any_session, requeued) == before


def test_a_pending_callback_is_kept_for_its_retry_window(any_session):
    waiting = ended(any_session, days_ago=0, callback="pending")
    delivered = ended(any_session, days_ago=0, callback="delivered")
    stale = ended(any_session, days_ago=2, callback="pending")  # long past its window
    assert admin.purge_jobs(any_session, 0, callback_deadline_s=10) == 2
    assert rows_of(any_session, waiting) > 0
    assert rows_of(any_session, delivered) == rows_of(any_session, stale) == 0
