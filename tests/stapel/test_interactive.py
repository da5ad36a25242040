"""The interactive lane's core: a job's end announced on Redis, waited on, purged later."""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy import func, select

from stapel import interactive
from stapel.broker import INTERACTIVE_PRIORITY
from stapel.jobs import DocumentSpec, JobSpec, create_job
from stapel.keys import get_or_create_tenant
from stapel.states import ChunkOutcome, Status
from stapel.tables import Job, Segment, utcnow


def make_job(session, api: str | None = "deepl", segments: int = 3) -> Job:
    tenant = get_or_create_tenant(session, "acme")
    spec = JobSpec("en", "de", [DocumentSpec(None, [f"s{i}" for i in range(segments)])], api=api)
    job, _ = create_job(session, tenant.id, spec, gpu_threshold=3000, chunk_segments=2000)
    return job


def end(session, job: Job, status: Status, ago_s: float = 0) -> None:
    job.status, job.finished_at = status, utcnow() - timedelta(seconds=ago_s)
    session.commit()


def test_a_waiter_wakes_on_the_announcement(session, redis_client):
    job = make_job(session)
    later = threading.Timer(
        0.2, interactive.announce_end, (redis_client, job.id, ChunkOutcome.JOB_SUCCEEDED)
    )
    later.start()
    # The job is still queued in the database: only the announcement can end the wait.
    assert interactive.wait_ended(redis_client, session, [job.id], timeout_s=30)
    later.join()


def test_an_end_announced_before_the_wait_is_not_missed(session, redis_client):
    job = make_job(session)
    interactive.announce_end(redis_client, job.id, ChunkOutcome.JOB_FAILED)
    assert redis_client.ttl(interactive.ended_key(job.id)) > 0
    assert interactive.wait_ended(redis_client, session, [job.id], timeout_s=0.5)


def test_outcomes_that_do_not_end_the_job_are_not_announced(session, redis_client):
    job = make_job(session)
    for outcome in (ChunkOutcome.CHUNK_SUCCEEDED, ChunkOutcome.REQUEUED, "stopped"):
        interactive.announce_end(redis_client, job.id, outcome)
    assert not redis_client.exists(interactive.ended_key(job.id))
    assert not interactive.wait_ended(redis_client, session, [job.id], timeout_s=0.3)


def test_an_end_nobody_announced_is_read_from_the_database(session, redis_client):
    """The watchdog failing a job, or a cancel, announces nothing: the DB check sees it."""
    first, second = make_job(session), make_job(session)
    interactive.announce_end(redis_client, first.id, ChunkOutcome.JOB_SUCCEEDED)
    end(session, second, Status.CANCELLED)
    assert interactive.wait_ended(redis_client, session, [first.id, second.id], timeout_s=10)


def test_purge_deletes_only_compat_jobs_ended_long_enough_ago(any_session):
    s = any_session
    old = make_job(s)
    end(s, old, Status.SUCCEEDED, ago_s=7200)
    recent = make_job(s, api="libretranslate")
    end(s, recent, Status.FAILED, ago_s=10)
    v1 = make_job(s, api=None)
    end(s, v1, Status.SUCCEEDED, ago_s=7200)
    running = make_job(s)
    running.status = Status.RUNNING
    s.commit()
    old_id = old.id
    assert interactive.purge(s, keep_s=3600) == 1
    left = set(s.scalars(select(Job.id)))
    assert left == {recent.id, v1.id, running.id}
    assert s.scalar(select(func.count()).where(Segment.job_id == old_id)) == 0  # cascaded
    assert s.scalar(select(func.count()).where(Segment.job_id == recent.id)) == 3


def test_delete_keeps_a_job_that_is_active_again(any_session):
    s = any_session
    job = make_job(s)
    assert interactive.delete_jobs(s, [job.id]) == 0  # queued: not ended, kept
    end(s, job, Status.SUCCEEDED)
    assert interactive.delete_jobs(s, [job.id]) == 1
    assert s.scalar(select(func.count()).where(Job.id == job.id)) == 0


def test_only_the_lanes_jobs_are_waited_on():
    """Workers announce the ends of the interactive lane's jobs only (nobody waits on others)."""
    assert interactive.waited_on(INTERACTIVE_PRIORITY)
    assert not interactive.waited_on(INTERACTIVE_PRIORITY - 1)
