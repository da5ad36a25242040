"""Characters billed per tenant and UTC day, counted as DeepL counts them.

DeepL bills every character of the source text, spaces and punctuation included, and
answers it as `billed_characters`. Stapel counts the same for each request of the compat
dialects (text and documents), per tenant and UTC day, in Redis beside the segment
quota's counter; STAPEL_QUOTA_CHARACTERS_PER_DAY limits it (0 = no limit) and
/deepl/v2/usage reports it. Like stapel.quotas, the counter is raised before the job is
stored and lowered again if storing it fails, so concurrent requests never overshoot.
The characters of a request whose jobs were stored are added to the tenant's
`usage_days` row (stapel.ledger), the bill's truth: a counter Redis lost is rebuilt from
it by the next charge, and the usage read reports the larger of the two.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import redis
from sqlalchemy.orm import Session

from stapel import ledger
from stapel.quotas import QuotaExceeded, next_reset
from stapel.tables import utcnow

UNLIMITED = 10**12
"""The character limit DeepL reports for an account without one (its client reads a limit
of 0 as reached)."""


def characters(texts: Iterable[str]) -> int:
    """Return the billed characters of texts: every code point, whitespace included."""
    return sum(len(t) for t in texts)


def day_key(tenant_id: str, now: datetime) -> str:
    """Return the Redis key of the tenant's character counter for now's UTC day."""
    return f"stapel:quota:{tenant_id}:characters:{now.astimezone(timezone.utc):%Y%m%d}"


def used(client: redis.Redis, session: Session, tenant_id: str, now: datetime | None = None) -> int:
    """Return the characters the tenant was billed today."""
    now = now or utcnow()
    counted = int(client.get(day_key(tenant_id, now)) or 0)
    return max(counted, ledger.read(session, tenant_id, ledger.utc_day(now))[1])


@contextmanager
def charge(
    client: redis.Redis,
    session: Session,
    tenant_id: str,
    count: int,
    *,
    limit: int,
    now: datetime | None = None,
) -> Iterator[None]:
    """Bill count characters for the block; raise QuotaExceeded over the daily limit.

    The charge is given back if the block raises, and stored in the tenant's row of the
    day if it does not (committed).
    """
    now = now or utcnow()
    key, reset = day_key(tenant_id, now), next_reset(now)
    total = client.incrby(key, count)
    client.expireat(key, reset + timedelta(days=1))
    if total == count:  # the day's first charge, or the first since Redis lost its data
        stored = ledger.read(session, tenant_id, ledger.utc_day(now))[1]
        if stored:
            total = client.incrby(key, stored)
    if limit and total > limit:
        client.decrby(key, count)
        raise QuotaExceeded(
            f"quota of {limit} characters per day would be passed: {total - count} billed "
            f"today, this request has {count}; it resets at {reset.isoformat()}",
            code="quota_characters_per_day",
            retry_after_s=int((reset - now).total_seconds()) + 1,
        )
    try:
        yield
    except BaseException:
        client.decrby(key, count)
        raise
    ledger.add(session, tenant_id, ledger.utc_day(now), characters=count)
    session.commit()
