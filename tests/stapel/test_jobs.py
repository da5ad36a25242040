"""Job logic on both databases: create, claim once, progress, finish, fail, cancel, watchdog."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from stapel import chunks as ch
from stapel import jobs
from stapel.dispatch import mark_sent
from stapel.dispatch import messages as dispatch_messages
from stapel.exceptions import Conflict, NotFound
from stapel.keys import get_or_create_tenant
from stapel.states import ChunkOutcome
from stapel.tables import Chunk, Job, Segment, utcnow
from stapel.watchdog import reconcile


def make_job(session, n=5, chunk=2, docs=1, **spec):
    tenant = get_or_create_tenant(session, "acme").id
    per_doc = [jobs.DocumentSpec(f"d{d}", [f"seg {d}-{i}" for i in range(n)]) for d in range(docs)]
    job, created = jobs.create_job(
        session,
        tenant,
        jobs.JobSpec("en", "de", per_doc, **spec),
        gpu_threshold=100,
        chunk_segments=chunk,
    )
    assert created
    return tenant, job


def chunk_ids(session, job_id):
    return list(session.scalars(select(Chunk.id).where(Chunk.job_id == job_id).order_by(Chunk.idx)))


@pytest.mark.parametrize(
    ("total", "size", "expected"),
    [
        (0, 10, [(0, 0)]),
        (1, 10, [(0, 1)]),
        (10, 10, [(0, 10)]),
        (11, 10, [(0, 10), (10, 11)]),
        (25, 10, [(0, 10), (10, 20), (20, 25)]),
    ],
)
def test_chunk_bounds(total, size, expected):
    assert jobs.chunk_bounds(total, size) == expected


@pytest.mark.parametrize(("total", "pool"), [(1, "cpu"), (2999, "cpu"), (3000, "gpu")])
def test_route_pool(total, pool):
    assert jobs.route_pool(total, 3000) == pool


def test_create_job_stores_segments_documents_and_chunks(any_session):
    _, job = make_job(any_session, n=5, chunk=2, docs=2)
    assert job.segments_total == 10 and job.chunks_total == 5 and job.status == "queued"
    sources = any_session.scalars(
        select(Segment.source).where(Segment.job_id == job.id).order_by(Segment.idx)
    ).all()
    assert sources[:6] == [f"seg 0-{i}" for i in range(5)] + ["seg 1-0"]
    assert len(dispatch_messages(any_session, set(), job_id=job.id)) == 5


def test_claim_is_compare_and_set(any_session):
    _, job = make_job(any_session, n=3, chunk=10)
    (cid,) = chunk_ids(any_session, job.id)
    first = ch.claim_chunk(any_session, cid, "w1")
    assert first is not None and first.attempt == 1
    assert ch.claim_chunk(any_session, cid, "w2") is None
    any_session.expire_all()
    assert any_session.get(Job, job.id).status == "running"


def test_progress_and_finish(any_session):
    _, job = make_job(any_session, n=3, chunk=2)
    c1, c2 = chunk_ids(any_session, job.id)
    a = ch.claim_chunk(any_session, c1, "w")
    assert [i for i, _ in ch.pending_segments(any_session, a)] == [0, 1]
    assert ch.record_batch(any_session, a, [(0, "eins")])
    any_session.expire_all()
    assert any_session.get(Job, job.id).segments_done == 1
    assert ch.record_batch(any_session, a, [(1, "zwei")])
    assert ch.finish_chunk(any_session, a) == ChunkOutcome.CHUNK_SUCCEEDED  # chunk 2 queued
    b = ch.claim_chunk(any_session, c2, "w")
    ch.record_batch(any_session, b, [(2, "drei")])
    assert ch.finish_chunk(any_session, b) == ChunkOutcome.JOB_SUCCEEDED
    any_session.expire_all()
    done = any_session.get(Job, job.id)
    assert (done.status, done.segments_done) == ("succeeded", 3)
    result = [(name, list(segs)) for name, segs in jobs.iter_result(any_session, done)]
    assert result == [("d0", ["eins", "zwei", "drei"])]


def test_a_one_chunk_job_ends_with_its_last_translations_in_one_write(any_session):
    _, job = make_job(any_session, n=2, chunk=10)
    (cid,) = chunk_ids(any_session, job.id)
    claim = ch.claim_chunk(any_session, cid, "w")
    assert (claim.chunks_total, claim.has_callback) == (1, False)
    assert claim.sent_at == job.created_at  # the first send is recorded with the insert
    assert (
        ch.finish_chunk(any_session, claim, [(0, "eins"), (1, "zwei")])
        == ChunkOutcome.JOB_SUCCEEDED
    )
    any_session.expire_all()
    done = any_session.get(Job, job.id)
    assert (done.status, done.segments_done, done.started_at is not None) == ("succeeded", 2, True)
    assert [list(segs) for _, segs in jobs.iter_result(any_session, done)] == [["eins", "zwei"]]


def test_finish_after_a_lost_claim_keeps_the_translations_and_changes_nothing_else(any_session):
    _, job = make_job(any_session, n=2, chunk=10)
    (cid,) = chunk_ids(any_session, job.id)
    claim = ch.claim_chunk(any_session, cid, "w")
    jobs.cancel_job(any_session, job.tenant_id, job.id)
    assert ch.finish_chunk(any_session, claim, [(0, "eins"), (1, "zwei")]) == ChunkOutcome.LOST
    any_session.expire_all()
    assert any_session.get(Job, job.id).status == "cancelled"
    assert any_session.get(Chunk, cid).status == "cancelled"
    assert (
        any_session.scalar(select(Segment.target).where(Segment.job_id == job.id, Segment.idx == 1))
        == "zwei"
    )


def test_resume_skips_written_segments(any_session):
    _, job = make_job(any_session, n=4, chunk=10)
    (cid,) = chunk_ids(any_session, job.id)
    a = ch.claim_chunk(any_session, cid, "w")
    ch.record_batch(any_session, a, [(0, "x"), (2, "y")])
    any_session.execute(
        update(Chunk).where(Chunk.id == cid).values(heartbeat_at=utcnow() - timedelta(minutes=5))
    )
    any_session.commit()
    report = reconcile(
        any_session,
        heartbeat_timeout_s=60,
        max_attempts=3,
        grace_s=0,
        live_task_ids=set(),
    )
    assert (report.stale, report.requeued, len(report.to_send)) == (1, 1, 1)
    b = ch.claim_chunk(any_session, cid, "w2")
    assert b.attempt == 2
    assert [i for i, _ in ch.pending_segments(any_session, b)] == [1, 3]
    assert not ch.record_batch(any_session, a, [(1, "stale worker")])  # old claim is dead


def test_watchdog_fails_after_max_attempts(any_session):
    _, job = make_job(any_session, n=2, chunk=10)
    (cid,) = chunk_ids(any_session, job.id)
    for attempt in range(1, 4):
        claim = ch.claim_chunk(any_session, cid, f"w{attempt}")
        assert claim.attempt == attempt
        any_session.execute(
            update(Chunk)
            .where(Chunk.id == cid)
            .values(heartbeat_at=utcnow() - timedelta(minutes=5))
        )
        any_session.commit()
        reconcile(
            any_session,
            heartbeat_timeout_s=60,
            max_attempts=3,
            grace_s=0,
            live_task_ids=set(),
        )
    any_session.expire_all()
    failed = any_session.get(Job, job.id)
    assert failed.status == "failed"
    assert "giving up after 3 attempts" in failed.error


def test_watchdog_twice_changes_once(any_session):
    _, job = make_job(any_session, n=2, chunk=10)
    (cid,) = chunk_ids(any_session, job.id)
    ch.claim_chunk(any_session, cid, "w")
    past = utcnow() - timedelta(minutes=5)
    any_session.execute(
        update(Chunk).where(Chunk.id == cid).values(heartbeat_at=past, created_at=past)
    )
    any_session.commit()
    # the second pass runs right after the first: within the grace of the first's resend
    kwargs = dict(heartbeat_timeout_s=60, max_attempts=3, grace_s=30, live_task_ids=set())
    first = reconcile(any_session, **kwargs)
    second = reconcile(any_session, **kwargs)
    assert first.requeued == 1 and len(first.to_send) == 1
    assert second.requeued == 0 and len(second.to_send) == 0


def test_watchdog_resends_unsent_and_lost_but_not_live(any_session):
    _, job = make_job(any_session, n=3, chunk=1)
    c1, c2, c3 = chunk_ids(any_session, job.id)
    past = utcnow() - timedelta(minutes=5)
    any_session.execute(update(Chunk).values(created_at=past, sent_at=None))
    mark_sent(any_session, {c2: "task-live", c3: "task-lost"}, now=past)
    report = reconcile(
        any_session,
        heartbeat_timeout_s=60,
        max_attempts=3,
        grace_s=30,
        live_task_ids={"task-live"},
    )
    assert sorted(report.to_send) == sorted([c1, c3])
    # Without a view of the broker only never-sent chunks are resent.
    any_session.execute(update(Chunk).values(sent_at=None))
    any_session.commit()
    mark_sent(any_session, {c2: "a", c3: "b"}, now=past)
    report = reconcile(
        any_session,
        heartbeat_timeout_s=60,
        max_attempts=3,
        grace_s=30,
        live_task_ids=None,
    )
    assert list(report.to_send) == [c1]


def test_fail_chunk_retries_alone_then_fails_job(any_session):
    _, job = make_job(any_session, n=4, chunk=2)
    c1, c2 = chunk_ids(any_session, job.id)
    ok = ch.claim_chunk(any_session, c1, "w")
    bad = ch.claim_chunk(any_session, c2, "w")
    assert (
        ch.fail_chunk(any_session, bad, "boom", retry=True, max_attempts=2) == ChunkOutcome.REQUEUED
    )
    any_session.expire_all()
    assert any_session.get(Chunk, c1).status == "running"
    bad = ch.claim_chunk(any_session, c2, "w")
    assert (
        ch.fail_chunk(any_session, bad, "boom", retry=True, max_attempts=2)
        == ChunkOutcome.JOB_FAILED
    )
    any_session.expire_all()
    failed = any_session.get(Job, job.id)
    assert failed.status == "failed" and "boom" in failed.error
    assert any_session.get(Chunk, c1).status == "cancelled"
    assert not ch.record_batch(any_session, ok, [(0, "late")])


def test_cancel(any_session):
    tenant, job = make_job(any_session, n=2, chunk=1)
    c1, _ = chunk_ids(any_session, job.id)
    claim = ch.claim_chunk(any_session, c1, "w")
    ch.record_batch(any_session, claim, [(0, "kept")])
    assert jobs.cancel_job(any_session, tenant, job.id).status == "cancelled"
    assert not ch.record_batch(any_session, claim, [(1, "x")])
    assert ch.claim_chunk(any_session, chunk_ids(any_session, job.id)[1], "w") is None
    with pytest.raises(Conflict):
        jobs.cancel_job(any_session, tenant, job.id)
    result = [list(s) for _, s in jobs.iter_result(any_session, job)]
    assert result[0][0] == "kept"


def test_get_job_is_tenant_scoped(any_session):
    _, job = make_job(any_session)
    other = get_or_create_tenant(any_session, "globex").id
    with pytest.raises(NotFound):
        jobs.get_job(any_session, other, job.id)


def test_read_job_is_the_stored_job_and_tenant_scoped(any_session):
    tenant, job = make_job(any_session, n=3, metadata={"ticket": 7})
    any_session.execute(
        update(Job).where(Job.id == job.id).values(segments_done=2, status="running")
    )
    any_session.commit()
    any_session.expire_all()
    stored = jobs.get_job(any_session, tenant, job.id)
    row = jobs.read_job(any_session.connection(), tenant, job.id)
    assert row.segments_done == 2 and row.status == "running"
    assert {attr: getattr(row, attr) for attr, _ in jobs._JOB_COLUMNS} == {
        attr: getattr(stored, attr) for attr, _ in jobs._JOB_COLUMNS
    }
    other = get_or_create_tenant(any_session, "globex").id
    with pytest.raises(NotFound):
        jobs.read_job(any_session.connection(), other, job.id)


def test_idempotency_returns_first_job(any_session):
    tenant, job = make_job(any_session, idempotency_key="k1")
    again, created = jobs.create_job(
        any_session,
        tenant,
        jobs.JobSpec("en", "de", [jobs.DocumentSpec(None, ["z"])], idempotency_key="k1"),
        gpu_threshold=100,
        chunk_segments=10,
    )
    assert not created and again.id == job.id


def test_list_jobs_pages_newest_first(any_session):
    tenant = get_or_create_tenant(any_session, "acme").id
    made = [make_job(any_session)[1] for _ in range(5)]
    page1 = jobs.list_jobs(any_session, tenant, limit=3)
    page2 = jobs.list_jobs(
        any_session, tenant, limit=3, before=(page1[-1].created_at, page1[-1].id)
    )
    # the database's clock never runs back; SQLite's has milliseconds, so jobs made within
    # one are ordered by id, as the cursor is
    assert [j.created_at for j in made] == sorted(j.created_at for j in made)
    newest_first = sorted(made, key=lambda j: (j.created_at, j.id), reverse=True)
    assert [j.id for j in page1 + page2] == [j.id for j in newest_first]
