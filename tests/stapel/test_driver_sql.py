"""Writes straight on a Connection's DBAPI cursor (stapel.driver_sql), on both databases:
stored as through the Connection, in its transaction, errors as SQLAlchemy's."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError, OperationalError

from stapel.driver_sql import DriverStatement
from stapel.keys import get_or_create_tenant
from stapel.tables import Chunk, Job, Tenant, new_id, utcnow
from tests.stapel.test_db import add_tenant, sqlite_sessions  # noqa: F401  (a fixture)
from tests.stapel.test_jobs import make_job

CHUNKS = Chunk.__table__
INSERT_CHUNK = DriverStatement(insert(CHUNKS))
INSERT_CHUNK_RETURNING = DriverStatement(insert(CHUNKS).returning(CHUNKS.c.created_at))


def _chunk(job_id: str, idx: int, **columns) -> dict:
    made = {"id": new_id(), "job_id": job_id, "idx": idx, "pool": "cpu", "created_at": utcnow()}
    return made | columns


def _stored(session, chunk_id: str) -> dict:
    row = session.execute(select(CHUNKS).where(CHUNKS.c.id == chunk_id)).one()._asdict()
    return {k: v for k, v in row.items() if k not in ("id", "idx")}


def test_a_row_is_stored_as_through_the_connection(any_session):
    _tenant, job = make_job(any_session)
    now = utcnow()
    columns = {
        "first_segment": 0,
        "end_segment": 7,
        "status": "running",
        "done": 3,
        "attempts": 2,
        "task_id": new_id(),
        "sent_at": now,
        "created_at": now,
        "error": "ü " * 3,
    }
    driver, core = _chunk(job.id, 10, **columns), _chunk(job.id, 11, **columns)
    conn = any_session.connection()
    INSERT_CHUNK.executemany(conn, [driver])
    conn.execute(insert(CHUNKS), [core])
    any_session.commit()
    assert _stored(any_session, driver["id"]) == _stored(any_session, core["id"])
    stored = _stored(any_session, driver["id"])
    assert stored["sent_at"] == now and stored["sent_at"].utcoffset() is not None
    assert stored["from_cache"] == 0  # a column not given takes its scalar default


def test_a_returned_value_reads_as_its_column_type(any_session):
    _tenant, job = make_job(any_session)
    now = utcnow()
    conn = any_session.connection()
    returned = INSERT_CHUNK_RETURNING.execute(
        conn,
        _chunk(job.id, 10, first_segment=0, end_segment=1, status="queued", created_at=now),
    )
    assert returned == now and returned.utcoffset() is not None
    without = _chunk(job.id, 11, first_segment=0, end_segment=1, created_at=now)
    assert INSERT_CHUNK.execute(conn, without) is None


def test_the_writes_share_the_connections_transaction(any_session):
    _tenant, job = make_job(any_session)
    chunk = _chunk(job.id, 10, first_segment=0, end_segment=1, status="queued")
    INSERT_CHUNK.execute(any_session.connection(), chunk)
    any_session.rollback()
    assert any_session.scalar(select(Chunk.id).where(Chunk.id == chunk["id"])) is None
    INSERT_CHUNK.execute(any_session.connection(), chunk)
    any_session.commit()
    assert any_session.scalar(select(Chunk.id).where(Chunk.id == chunk["id"])) == chunk["id"]


def test_a_driver_error_is_sqlalchemys_and_the_session_goes_on(any_session):
    _tenant, job = make_job(any_session)
    chunk = _chunk(job.id, 10, first_segment=0, end_segment=1, status="queued")
    INSERT_CHUNK.execute(any_session.connection(), chunk)
    any_session.commit()
    with pytest.raises(IntegrityError):
        INSERT_CHUNK.execute(any_session.connection(), chunk)
    any_session.rollback()
    again = _chunk(job.id, 11, first_segment=0, end_segment=1, status="queued")
    INSERT_CHUNK.execute(any_session.connection(), again)
    any_session.commit()
    assert any_session.scalar(select(Chunk.id).where(Chunk.id == again["id"])) == again["id"]


def test_a_column_without_a_constant_default_must_be_given(any_session):
    tenant = get_or_create_tenant(any_session, "acme").id
    with pytest.raises(ValueError, match="default is not a constant"):
        # jobs.id's default is a function (new_id): left out, it would not be filled in
        DriverStatement(insert(Job.__table__)).execute(
            any_session.connection(), {"tenant_id": tenant, "status": "queued"}
        )


def test_a_driver_write_holds_sqlites_write_turn_until_the_commit(sqlite_sessions):  # noqa: F811
    tenants = DriverStatement(insert(Tenant.__table__))  # type: ignore[arg-type]
    with sqlite_sessions() as first, sqlite_sessions() as second:
        tenant = {"id": "a", "name": "a", "callback_secret": "s", "created_at": utcnow()}
        tenants.execute(first.connection(), tenant)
        with pytest.raises(OperationalError, match="no write turn within"):
            add_tenant(second, "b")  # queued behind `first`'s driver write
        second.rollback()
        first.commit()
        add_tenant(second, "b")
        second.commit()
        assert sorted(second.scalars(select(Tenant.name))) == ["a", "b"]
