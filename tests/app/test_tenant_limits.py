"""Limits count per tenant and are sized for batch use; a quota refund hits the right day."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from app import create_app
from stapel import jobs, quotas, submit
from stapel.keys import create_key
from tests.factories import job_body, sentences


@pytest.fixture
def make_app(engine, redis_client, settings_overrides):
    made = []

    def build(**changes):
        application = create_app({**settings_overrides, **changes})
        application.config["TESTING"] = True
        made.append(application)
        return application

    yield build
    for application in made:
        application.extensions["stapel"].engine.dispose()


def bearer(app, tenant: str) -> dict:
    with app.extensions["stapel"].sessions() as s:
        return {"Authorization": f"Bearer {create_key(s, tenant)[1]}"}


def test_the_keys_of_one_tenant_share_its_rate_limit(make_app):
    app = make_app(rate_submit="3/minute")
    client = app.test_client()
    first, second, other = bearer(app, "acme"), bearer(app, "acme"), bearer(app, "globex")
    for key in (first, second, first):
        assert client.post("/v1/jobs", headers=key, json=job_body()).status_code == 202
    response = client.post("/v1/jobs", headers=second, json=job_body())
    assert response.status_code == 429, "a second key buys no second share"
    assert "for this tenant" in response.get_json()["error"]["message"]
    assert client.post("/v1/jobs", headers=other, json=job_body()).status_code == 202


def test_the_defaults_take_a_burst_of_500_small_jobs_from_one_tenant(make_app):
    app = make_app()
    client, acme = app.test_client(), bearer(app, "acme")
    codes = [
        client.post(
            "/v1/jobs", headers=acme, json=job_body(sentences(1 + n % 5, seed=n))
        ).status_code
        for n in range(500)
    ]
    assert codes == [202] * 500
    assert client.get("/v1/jobs?limit=1", headers=acme).status_code == 200


def test_a_refund_goes_to_the_day_the_segments_were_counted_on(app, monkeypatch):
    """An idempotent replay that loses the race is refunded, across midnight too."""
    ext = app.extensions["stapel"]
    before_midnight = datetime(2026, 12, 1, 23, 59, 59, 900_000, tzinfo=timezone.utc)
    clock = iter([before_midnight, before_midnight + timedelta(seconds=1)])
    for module in (submit, quotas):  # whoever reads the clock, it moves past midnight
        monkeypatch.setattr(module, "utcnow", lambda: next(clock), raising=False)
    with ext.sessions() as s:
        tenant = create_key(s, "acme")[0].tenant_id
        spec = jobs.JobSpec("en", "de", [jobs.DocumentSpec(None, ["a", "b"])], idempotency_key="k")
        jobs.create_job(s, tenant, spec, gpu_threshold=10**9, chunk_segments=100)
        # The replay finds no stored job at first (the race), then loses the insert.
        monkeypatch.setattr(jobs, "by_idempotency_key", _none_once(jobs.by_idempotency_key))
        result = submit.submit(s, ext.redis, ext.celery, (), ext.settings, tenant, spec)
    assert not result.created
    day_one = ext.redis.get(quotas.day_key(tenant, before_midnight))
    day_two = ext.redis.get(quotas.day_key(tenant, before_midnight + timedelta(seconds=1)))
    assert int(day_one or 0) == 0 and day_two is None


def _none_once(real):
    calls = []

    def lookup(*args):
        calls.append(args)
        return None if len(calls) == 1 else real(*args)

    return lookup
