"""One lock order on PostgreSQL: every state change waits for the job's row before it
touches a chunk, and a deadlock that still happens is retried, never answered."""

from __future__ import annotations

import logging
import threading

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.exc import OperationalError

from stapel import chunks as ch
from stapel import jobs
from stapel.db import make_engine, make_session_factory
from stapel.locking import is_conflict, lock_job
from stapel.tables import Chunk, Job
from tests.conftest import truncate
from tests.factories import wait_for
from tests.stapel.test_jobs import chunk_ids, make_job


@pytest.fixture
def pg_sessions(postgres_url):
    engine = make_engine(postgres_url)
    truncate(engine)
    yield make_session_factory(engine)
    engine.dispose()


def lock_waiters(session) -> int:
    """Backends of this database waiting for a row or transaction lock now."""
    count = session.scalar(
        text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
    )
    session.rollback()  # pg_stat_activity is a snapshot per transaction
    return count


def in_thread(call) -> tuple[threading.Thread, list]:
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:  # handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


OPERATIONS = {
    "claim": lambda s, claim, queued: ch.claim_chunk(s, queued, "w2"),
    "record_batch": lambda s, claim, queued: ch.record_batch(s, claim, [(0, "x")]),
    "finish": lambda s, claim, queued: ch.finish_chunk(s, claim, [(0, "x")]),
    "fail": lambda s, claim, queued: ch.fail_chunk(s, claim, "e", retry=False, max_attempts=1),
    "cancel": lambda s, claim, queued: jobs.cancel_job(s, claim_tenant(s, claim), claim.job_id),
}


def claim_tenant(session, claim) -> str:
    return session.scalar(select(Job.tenant_id).where(Job.id == claim.job_id))


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_every_state_change_takes_the_job_before_its_chunks(pg_sessions, operation):
    with pg_sessions() as setup:
        _, job = make_job(setup, n=2, chunk=1)
        running, queued = chunk_ids(setup, job.id)
        claim = ch.claim_chunk(setup, running, "w1")
    with pg_sessions() as holder, pg_sessions() as worker, pg_sessions() as probe:
        lock_job(holder, job.id)
        thread, outcome = in_thread(lambda: OPERATIONS[operation](worker, claim, queued))
        try:
            wait_for(lambda: lock_waiters(probe), timeout=10, what="the operation to wait")
            # while it waits for the job, it holds none of the job's chunks
            rows = probe.execute(
                select(Chunk.id).where(Chunk.job_id == job.id).with_for_update(nowait=True)
            ).all()
            assert len(rows) == 2
            probe.rollback()
        finally:
            holder.commit()
            thread.join(10)
    assert outcome and not isinstance(outcome[0], Exception), outcome


def test_a_deadlock_is_retried_and_cancel_answers(pg_sessions, caplog):
    """A transaction in the old order (chunk, then job) against a cancel: PostgreSQL
    breaks the deadlock by aborting the cancel, which runs again and succeeds."""
    with pg_sessions() as setup:
        tenant, job = make_job(setup, n=2, chunk=1)
        (cid, _) = chunk_ids(setup, job.id)
        deadlocks = setup.scalar(
            text("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        )
    caplog.set_level(logging.WARNING, "stapel.locking")
    with pg_sessions() as old_order, pg_sessions() as api, pg_sessions() as probe:
        old_order.execute(text("SET LOCAL deadlock_timeout = '30s'"))  # the cancel detects it
        old_order.execute(update(Chunk).where(Chunk.id == cid).values(error="held"))
        thread, outcome = in_thread(lambda: jobs.cancel_job(api, tenant, job.id))
        try:
            wait_for(lambda: lock_waiters(probe), timeout=10, what="cancel to wait for the chunk")
            old_order.execute(update(Job).where(Job.id == job.id).values(error="held"))
        finally:
            old_order.commit()
            thread.join(20)
        after = probe.scalar(
            text("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        )
    assert outcome and not isinstance(outcome[0], Exception), outcome
    assert outcome[0].status == "cancelled"
    assert after - deadlocks == 1, "a real deadlock happened and was survived"
    assert any("deadlock detected" in r.getMessage() for r in caplog.records)


def test_conflicts_are_recognised(pg_sessions):
    with pg_sessions() as a, pg_sessions() as b:
        a.execute(text("CREATE TEMP TABLE IF NOT EXISTS t (x int)"))
        with pytest.raises(OperationalError) as raised:
            b.execute(text("SET LOCAL lock_timeout = '1ms'"))
            a.execute(text("LOCK TABLE tenants IN ACCESS EXCLUSIVE MODE"))
            b.execute(text("SELECT * FROM tenants"))
        assert is_conflict(raised.value)
