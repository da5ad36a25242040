"""The status read straight on a pooled connection (stapel.one_row), on both databases."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, update
from sqlalchemy.exc import OperationalError

from stapel import jobs
from stapel.db import make_reader
from stapel.exceptions import NotFound
from stapel.keys import get_or_create_tenant
from stapel.tables import Job, new_id, utcnow
from tests.stapel.test_jobs import make_job


@pytest.fixture
def reader(any_session):
    """The web's reader on the session's database (its own pool on PostgreSQL)."""
    engine = any_session.get_bind()
    reader = make_reader(engine)
    yield reader
    if reader is not engine:
        reader.dispose()


def test_every_column_reads_as_through_a_connection(any_session, reader):
    tenant, job = make_job(
        any_session,
        metadata={"ticket": 7, "tags": ["a", "ü"]},
        callback_url="https://example.com/hook",
        split_sentences=False,
        use_cache=False,
        memories=("m1", "m2"),
        min_score=0.25,
        below_min_score="source",
    )
    now = utcnow()
    any_session.execute(
        update(Job)
        .where(Job.id == job.id)
        .values(status="failed", started_at=now, finished_at=now, error="boom", attempts=2)
    )
    any_session.commit()
    with reader.connect() as conn:
        through_connection = jobs.read_job(conn, tenant, job.id)
    row = jobs.read_job(reader, tenant, job.id)
    names = [attr for attr, _ in jobs._JOB_COLUMNS]
    assert {n: getattr(row, n) for n in names} == {n: getattr(through_connection, n) for n in names}
    assert row.meta == {"ticket": 7, "tags": ["a", "ü"]}
    assert row.split_sentences is False and row.use_cache is False
    assert row.finished_at == now and row.finished_at.utcoffset() is not None
    assert list(row.memories) == ["m1", "m2"]
    assert (row.min_score, row.below_min_score) == (0.25, "source")  # a float column too


def test_another_tenants_job_is_not_found(any_session, reader):
    _tenant, job = make_job(any_session)
    other = get_or_create_tenant(any_session, "globex").id
    with pytest.raises(NotFound):
        jobs.read_job(reader, other, job.id)
    with pytest.raises(NotFound):
        jobs.read_job(reader, other, "no-such-job")


def test_a_broken_pooled_connection_is_replaced_and_the_read_answers(any_session, reader):
    tenant, job = make_job(any_session)
    jobs.read_job(reader, tenant, job.id)  # the pool now holds a connection
    pooled = reader.raw_connection()
    broken = pooled.driver_connection
    broken.close()  # as a server restart or a dropped socket leaves it
    pooled.close()
    assert jobs.read_job(reader, tenant, job.id).id == job.id
    again = reader.raw_connection()
    try:
        assert again.driver_connection is not broken
    finally:
        again.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_database_out_of_reach_raises_sqlalchemys_error(kind, tmp_path):
    """The API answers SQLAlchemy's OperationalError with 503; the driver's own would be 500."""
    url = f"sqlite:///{tmp_path}" if kind == "sqlite" else "postgresql://postgres@127.0.0.1:1/x"
    engine = create_engine(url)  # a directory is no database file; nothing listens on port 1
    try:
        with pytest.raises(OperationalError):
            jobs.read_job(engine, "tenant", new_id())
    finally:
        engine.dispose()
