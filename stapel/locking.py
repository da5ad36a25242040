"""One lock order for every state change, and retries for the conflicts a database reports.

The order is: a tenant row (callback leases only), then a job row, then that job's
chunk rows, then its segment rows. Every transaction that changes the status of a job
or of one of its chunks (claim, batch write, finish, fail, cancel, requeue, the
watchdog's repairs, purge) starts with `lock_job`, so two of them on one job queue on
the job row and neither can hold a chunk the other waits for. (Before, a worker locked
its chunk and then the job while cancel and fail locked the job and then its chunks:
PostgreSQL answered `deadlock detected`.)

- PostgreSQL: `SELECT ... FOR NO KEY UPDATE` on the job, which does not block the
  foreign-key checks of rows inserted beside it.
- SQLite has one writer per database file: `lock_job` makes the transaction's first
  statement a write, so the transaction holds the write lock before it reads anything.

A conflict the database still reports (a deadlock or serialization failure on
PostgreSQL, a busy or locked database on SQLite) rolls the transaction back; the
function decorated with `retry_conflicts` runs again after a short, jittered backoff.
Only functions that are one whole transaction are decorated, never their helpers.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable, Collection
from typing import Concatenate, ParamSpec, TypeVar

from sqlalchemy import Executable, bindparam, select, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from stapel.db import ids_in
from stapel.tables import Job, Tenant

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

CONFLICT_DELAYS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
"""Seconds between tries of a transaction that lost a lock conflict (about 2 s in all)."""
POSTGRES_CONFLICTS = frozenset({"40P01", "40001", "55P03"})
"""deadlock_detected, serialization_failure, lock_not_available."""
SQLITE_CONFLICTS = frozenset({"SQLITE_BUSY", "SQLITE_BUSY_SNAPSHOT", "SQLITE_LOCKED"})


def is_conflict(exc: BaseException) -> bool:
    """Return whether a database error is a lock conflict that a new try can win."""
    orig = getattr(exc, "orig", None)
    return (
        getattr(orig, "sqlstate", None) in POSTGRES_CONFLICTS
        or getattr(orig, "sqlite_errorname", None) in SQLITE_CONFLICTS
    )


def retry_conflicts(
    call: Callable[Concatenate[Session, P], T],
) -> Callable[Concatenate[Session, P], T]:
    """Run a one-transaction function (session first) again when it loses a lock conflict."""

    @functools.wraps(call)
    def retried(session: Session, /, *args: P.args, **kwargs: P.kwargs) -> T:
        for delay in CONFLICT_DELAYS:
            try:
                return call(session, *args, **kwargs)
            except OperationalError as exc:
                if not is_conflict(exc):
                    raise
                session.rollback()
                log.warning(
                    "lock conflict, retrying in %.2fs call=%s error=%s",
                    delay,
                    call.__name__,
                    str(exc.orig).splitlines()[0] if exc.orig else exc,
                )
                time.sleep(delay * (0.5 + random.random()))
        return call(session, *args, **kwargs)

    return retried


def _sqlite(session: Session) -> bool:
    return session.get_bind().dialect.name == "sqlite"


_JOBS = Job.__table__
_JOB_STATUS = select(_JOBS.c.status).where(_JOBS.c.id == bindparam("lock_job_id"))
_LOCK_SQLITE = (
    update(_JOBS)  # type: ignore[arg-type]
    .where(_JOBS.c.id == bindparam("lock_job_id"))
    .values(status=_JOBS.c.status)
)
_LOCK_POSTGRES = (
    select(_JOBS.c.id).where(_JOBS.c.id == bindparam("lock_job_id")).with_for_update(key_share=True)
)


def lock_job(session: Session, job_id: str) -> None:
    """Lock a job's row for this transaction (a job that does not exist locks nothing).

    The statements are built once (this runs at least twice per chunk a worker takes).
    """
    statement = _LOCK_SQLITE if _sqlite(session) else _LOCK_POSTGRES
    session.execute(statement, {"lock_job_id": job_id})


def lock_jobs(session: Session, job_ids: Collection[str]) -> None:
    """Lock several jobs' rows for this transaction, in id order (a group of chunks'
    claims or finishes): two groups, or a group and a one-job transaction, never wait on
    each other in a cycle."""
    ids = sorted(set(job_ids))
    if len(ids) == 1:
        lock_job(session, ids[0])
        return
    if _sqlite(session):
        session.execute(
            update(_JOBS).where(_JOBS.c.id.in_(ids)).values(status=_JOBS.c.status)  # type: ignore[arg-type]
        )
        return
    session.execute(_lock_many(session.get_bind().dialect.name), {"lock_ids": ids})


@functools.cache
def _lock_many(dialect: str) -> Executable:
    """lock_jobs' statement, built once per dialect (its ids are one parameter)."""
    return (
        select(_JOBS.c.id)
        .where(ids_in(dialect, _JOBS.c.id, "lock_ids"))
        .order_by(_JOBS.c.id)
        .with_for_update(key_share=True)
    )


def job_status(session: Session, job_id: str) -> str | None:
    """Return a job's status (None: no such job); after `lock_job`, the locked one."""
    return session.scalar(_JOB_STATUS, {"lock_job_id": job_id})


def lock_jobs_for_delete(session: Session, job_ids: Collection[str]) -> None:
    """Lock job rows that this transaction may delete (purge), in id order."""
    ids = sorted(job_ids)
    if _sqlite(session):
        session.execute(
            update(Job).where(Job.id.in_(ids)).values(status=Job.status),
            execution_options={"synchronize_session": False},
        )
        return
    session.execute(select(Job.id).where(Job.id.in_(ids)).order_by(Job.id).with_for_update())


def lock_tenant(session: Session, tenant_id: str) -> None:
    """Lock a tenant's row (taken before any of its jobs: callback leases count per tenant)."""
    if _sqlite(session):
        session.execute(
            update(Tenant).where(Tenant.id == tenant_id).values(name=Tenant.name),
            execution_options={"synchronize_session": False},
        )
        return
    session.execute(select(Tenant.id).where(Tenant.id == tenant_id).with_for_update(key_share=True))
