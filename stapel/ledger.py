"""The day's use per tenant in the database: the source of truth of quotas and bills.

Admission counts in Redis (stapel.quotas, stapel.billing), where a counter is one atomic
round trip; each use that sticks is also added to the tenant's `usage_days` row. The
segments of a job are added in the transaction that stores it, so the row counts
exactly the jobs stored; billed characters once the request's jobs are stored. A Redis
that lost its data (a restart without persistence, a failover to an empty replica)
finds the day's counter missing, and the first admission after it adds the row's
figure back (`seed`), so a Redis loss never resets a quota or a bill.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from datetime import date, datetime, timezone
from typing import cast

from sqlalchemy import Connection, Table, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from stapel.driver_sql import DriverStatement
from stapel.tables import UsageDay

SLOTS = 64
"""Rows per tenant and day; a write adds to its thread's, a read sums them. One row made a
tenant's concurrent submissions queue for its lock on PostgreSQL (docs/security.md)."""


_threads = itertools.count()
_mine = threading.local()


def _slot() -> int:
    """This thread's row: threads of one process never share one, few of others do.

    Threads are numbered as they first write; Python's `get_ident()` is a stack
    address, a multiple of 64, which put every thread of a process on one row.
    """
    slot = getattr(_mine, "slot", None)
    if slot is None:
        slot = _mine.slot = (os.getpid() * 7919 + next(_threads)) % SLOTS
    return slot


def utc_day(now: datetime) -> date:
    """Return now's UTC date (the day a daily quota counts on)."""
    return now.astimezone(timezone.utc).date()


Upsert = postgresql.Insert | sqlite.Insert


def _upsert(insert: Callable[[Table], Upsert]) -> Upsert:
    """The statement that adds to a row of the day, making it if missing."""
    table = cast(Table, UsageDay.__table__)
    statement = insert(table)
    return statement.on_conflict_do_update(
        index_elements=[table.c.tenant_id, table.c.day, table.c.slot],
        set_={
            "segments": table.c.segments + statement.excluded.segments,
            "characters": table.c.characters + statement.excluded.characters,
        },
    )


# built once: made at each call, it halved the jobs stored per second (docs/security.md)
_UPSERTS = {
    "postgresql": DriverStatement(_upsert(postgresql.insert)),
    "sqlite": DriverStatement(_upsert(sqlite.insert)),
}


def add(
    conn: Connection | Session,
    tenant_id: str,
    day: date,
    *,
    segments: int = 0,
    characters: int = 0,
) -> None:
    """Add to the tenant's row of the day (made if missing), in the caller's transaction."""
    if isinstance(conn, Session):
        conn = conn.connection()
    _UPSERTS["postgresql" if conn.dialect.name == "postgresql" else "sqlite"].execute(
        conn,
        {
            "tenant_id": tenant_id,
            "day": day,
            "slot": _slot(),
            "segments": segments,
            "characters": characters,
        },
    )


def read(session: Session, tenant_id: str, day: date) -> tuple[int, int]:
    """Return (segments, characters) the tenant used on day, as stored."""
    segments, characters = session.execute(
        select(func.sum(UsageDay.segments), func.sum(UsageDay.characters)).where(
            UsageDay.tenant_id == tenant_id, UsageDay.day == day
        )
    ).one()
    return int(segments or 0), int(characters or 0)
