"""Every accepted job ends: a chunk's last change and its job's end are one transaction,
safe to run again, and the watchdog ends any job whose chunks have all ended."""

from __future__ import annotations

import pytest
from sqlalchemy import event, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from stapel import chunks as ch
from stapel.states import ChunkOutcome
from stapel.tables import Chunk, Job, Segment
from stapel.watchdog import reconcile
from tests.stapel.test_jobs import chunk_ids, make_job
from workers import faults

WATCHDOG = dict(heartbeat_timeout_s=60, max_attempts=3, grace_s=30, live_task_ids=set())


@pytest.fixture
def job_end_fails_once():
    """The UPDATE that ends a job raises once per statement, as a lost connection would."""
    listener = faults.break_job_ends("finish-error")
    yield
    event.remove(Engine, "before_cursor_execute", listener)


def state(session, job_id):
    session.expire_all()
    job = session.get(Job, job_id)
    statuses = [c.status for c in session.scalars(select(Chunk).where(Chunk.job_id == job_id))]
    return job.status, sorted(statuses)


def test_an_error_before_the_job_update_leaves_nothing_half_done(any_session, job_end_fails_once):
    _, job = make_job(any_session, n=2, chunk=1)
    first, last = (ch.claim_chunk(any_session, c, "w") for c in chunk_ids(any_session, job.id))
    assert ch.finish_chunk(any_session, first, [(0, "eins")]) == ChunkOutcome.CHUNK_SUCCEEDED
    with pytest.raises(OperationalError, match="injected"):
        ch.finish_chunk(any_session, last, [(1, "zwei")])
    any_session.rollback()
    assert state(any_session, job.id) == ("running", ["running", "succeeded"])
    assert any_session.scalar(select(Segment.target).where(Segment.idx == 1)) is None
    # what with_retry does next: the same call again, and the job ends with the chunk
    assert ch.finish_chunk(any_session, last, [(1, "zwei")]) == ChunkOutcome.JOB_SUCCEEDED
    assert state(any_session, job.id) == ("succeeded", ["succeeded", "succeeded"])


def test_an_error_before_the_job_fails_leaves_the_chunk_running(any_session, job_end_fails_once):
    _, job = make_job(any_session, n=2, chunk=1)
    bad, other = (ch.claim_chunk(any_session, c, "w") for c in chunk_ids(any_session, job.id))
    with pytest.raises(OperationalError, match="injected"):
        ch.fail_chunk(any_session, bad, "boom", retry=False, max_attempts=3)
    any_session.rollback()
    assert state(any_session, job.id) == ("running", ["running", "running"])
    assert ch.fail_chunk(any_session, bad, "boom", retry=False, max_attempts=3) == "failed"
    assert state(any_session, job.id) == ("failed", ["cancelled", "failed"])
    assert not ch.record_batch(any_session, other, [(1, "late")])


@pytest.mark.parametrize("chunks", [1, 2])
def test_finishing_again_under_the_same_claim_counts_as_success(any_session, chunks):
    """A commit that landed but whose answer was lost: with_retry runs finish again."""
    _, job = make_job(any_session, n=2, chunk=2 // chunks)
    claims = [ch.claim_chunk(any_session, c, "w") for c in chunk_ids(any_session, job.id)]
    for claim in claims[:-1]:
        assert ch.finish_chunk(any_session, claim) == ChunkOutcome.CHUNK_SUCCEEDED
        assert ch.finish_chunk(any_session, claim) == ChunkOutcome.CHUNK_SUCCEEDED
    assert ch.finish_chunk(any_session, claims[-1]) == ChunkOutcome.JOB_SUCCEEDED
    assert ch.finish_chunk(any_session, claims[-1]) == ChunkOutcome.JOB_SUCCEEDED
    assert state(any_session, job.id)[0] == "succeeded"


def test_a_segment_is_written_once(any_session):
    _, job = make_job(any_session, n=1, chunk=1)
    (cid,) = chunk_ids(any_session, job.id)
    claim = ch.claim_chunk(any_session, cid, "w")
    ch.record_batch(any_session, claim, [(0, "first")])
    ch.record_batch(any_session, claim, [(0, "second")])  # a stale worker, or a re-run
    assert any_session.scalar(select(Segment.target)) == "first"


def stuck(session, statuses, job_status="running", **spec):
    """A job whose chunks have ended as given while the job itself is still active."""
    _, job = make_job(session, n=len(statuses), chunk=1, **spec)
    for cid, status in zip(chunk_ids(session, job.id), statuses, strict=True):
        session.execute(
            update(Chunk).where(Chunk.id == cid).values(status=status, error=f"{status} here")
        )
    session.execute(update(Job).where(Job.id == job.id).values(status=job_status))
    session.commit()
    return job.id


def test_watchdog_ends_every_job_whose_chunks_have_all_ended(any_session):
    url = {"callback_url": "https://example.com/hook"}
    done = stuck(any_session, ["succeeded", "succeeded"], **url)
    broken = stuck(any_session, ["failed", "succeeded"])
    requeued = stuck(any_session, ["succeeded"], job_status="queued", **url)
    orphaned = stuck(any_session, ["cancelled", "succeeded"])
    alive = stuck(any_session, ["succeeded", "running"])
    report = reconcile(any_session, **WATCHDOG)
    assert (report.stuck, report.ended) == (4, 4)
    assert [state(any_session, j)[0] for j in (done, broken, requeued, orphaned, alive)] == [
        "succeeded",
        "failed",
        "succeeded",
        "failed",
        "running",
    ]
    jobs = {j.id: j for j in any_session.scalars(select(Job))}
    assert jobs[done].segments_done == 2 and jobs[done].callback_status == "pending"
    assert jobs[broken].error == "chunk 0 failed: failed here"
    assert "cancelled" in jobs[orphaned].error
    assert sorted(report.callbacks) == sorted([done, requeued])  # sent in the same pass
    assert reconcile(any_session, **WATCHDOG).stuck == 0
