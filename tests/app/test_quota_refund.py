"""A quota refund goes to the day the segments were counted on."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from stapel import jobs, quotas, submit
from stapel.keys import create_key


def test_a_refund_goes_to_the_day_the_segments_were_counted_on(app, monkeypatch):
    """An idempotent replay (found by the insert's constraint) is refunded, across midnight."""
    ext = app.extensions["stapel"]
    # the coming midnight, not a fixed date: a day counter expires a day after its day
    # ends, and one of a past date is gone before the test reads it
    midnight = quotas.next_reset(datetime.now(timezone.utc))
    before_midnight = midnight - timedelta(milliseconds=100)
    clock = iter([before_midnight, before_midnight + timedelta(seconds=1)])
    for module in (submit, quotas):  # whoever reads the clock, it moves past midnight
        monkeypatch.setattr(module, "utcnow", lambda: next(clock), raising=False)
    with ext.sessions() as s:
        tenant = create_key(s, "acme")[0].tenant_id
        spec = jobs.JobSpec("en", "de", [jobs.DocumentSpec(None, ["a", "b"])], idempotency_key="k")
        jobs.create_job(s, tenant, spec, gpu_threshold=10**9, chunk_segments=100)
        # The replay reserves its segments before midnight and loses the insert after it.
        result = submit.submit(s, ext.redis, ext.celery, (), ext.settings, tenant, spec)
    assert not result.created
    day_one = ext.redis.get(quotas.day_key(tenant, before_midnight))
    day_two = ext.redis.get(quotas.day_key(tenant, before_midnight + timedelta(seconds=1)))
    # day one holds the stored job's 2 segments (added from the database's row of the day
    # by the first admission that found the counter empty), the replay's 2 refunded
    assert int(day_one or 0) == 2 and day_two is None
