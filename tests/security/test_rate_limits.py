"""Rate limits per tenant, shared in Redis; probes and docs are not limited."""

from __future__ import annotations

import io
import logging
import uuid

import pytest
from limits import parse

from app.limits import KEY_PREFIX, LEASE_MAX, RateLimited, RateLimiter
from tests.factories import job_body, sentences, wait_for
from tests.security.conftest import key_for


def test_reads_over_the_limit_get_429_with_retry_after(make_app):
    app = make_app(rate_read="3/minute")
    client, acme, globex = app.test_client(), key_for(app, "acme"), key_for(app, "globex")
    for _ in range(3):
        assert client.get("/v1/jobs", headers=acme).status_code == 200
    response = client.get(f"/v1/jobs/{uuid.uuid4()}", headers=acme)
    assert response.status_code == 429
    assert response.get_json()["error"]["code"] == "rate_limited"
    assert 1 <= int(response.headers["Retry-After"]) <= 61
    assert client.get("/v1/jobs", headers=globex).status_code == 200, "another key has its own"


def test_the_limit_is_shared_by_every_web_process(make_app):
    first, second = make_app(rate_submit="2/minute"), make_app(rate_submit="2/minute")
    acme = key_for(first, "acme")
    assert first.test_client().post("/v1/jobs", headers=acme, json=job_body()).status_code == 202
    assert second.test_client().post("/v1/jobs", headers=acme, json=job_body()).status_code == 202
    response = first.test_client().post("/v1/jobs", headers=acme, json=job_body())
    assert response.status_code == 429 and "Retry-After" in response.headers
    assert response.get_json()["error"]["code"] == "rate_limited"
    assert first.test_client().get("/v1/jobs", headers=acme).status_code == 200, (
        "reads have their own budget"
    )


def test_probes_metrics_and_docs_are_not_limited(make_app):
    app = make_app(rate_read="1/minute", rate_submit="1/minute")
    client, acme = app.test_client(), key_for(app, "acme")
    for _ in range(5):
        for path in ("/healthz", "/readyz", "/metrics", "/v1/openapi.json", "/docs"):
            assert client.get(path, headers=acme).status_code == 200, path


def test_redis_down_fails_open_with_a_warning(make_app):
    from tests.conftest import free_port

    app = make_app(redis_url=f"redis://127.0.0.1:{free_port()}/0", rate_read="1/minute")
    client, acme = app.test_client(), key_for(app, "acme")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("app.limits").addHandler(handler)
    try:
        for _ in range(3):
            assert client.get("/v1/jobs", headers=acme).status_code == 200
    finally:
        logging.getLogger("app.limits").removeHandler(handler)
    assert any("failing open" in r.getMessage() for r in records)
    response = client.post("/v1/jobs", headers=acme, json=job_body())
    assert response.status_code == 503, "a submission needs Redis for its quota and queue"
    assert response.get_json()["error"]["code"] == "broker_unavailable"


def test_the_keys_of_one_tenant_share_its_rate_limit(make_app):
    app = make_app(rate_submit="3/minute")
    client = app.test_client()
    first, second, other = key_for(app, "acme"), key_for(app, "acme"), key_for(app, "globex")
    for key in (first, second, first):
        assert client.post("/v1/jobs", headers=key, json=job_body()).status_code == 202
    response = client.post("/v1/jobs", headers=second, json=job_body())
    assert response.status_code == 429, "a second key buys no second share"
    assert "for this tenant" in response.get_json()["error"]["message"]
    assert client.post("/v1/jobs", headers=other, json=job_body()).status_code == 202


def test_the_defaults_take_a_burst_of_500_small_jobs_from_one_tenant(make_app):
    app = make_app()
    client, acme = app.test_client(), key_for(app, "acme")
    codes = [
        client.post(
            "/v1/jobs", headers=acme, json=job_body(sentences(1 + n % 5, seed=n))
        ).status_code
        for n in range(500)
    ]
    assert codes == [202] * 500
    assert client.get("/v1/jobs?limit=1", headers=acme).status_code == 200


def test_the_page_counts_as_a_read_and_its_files_do_not(make_app):
    app = make_app(rate_read="2/minute")
    client = app.test_client()
    for _ in range(2):
        assert client.get("/").status_code == 200
    refused = client.get("/")
    assert refused.status_code == 429 and refused.get_json()["error"]["code"] == "rate_limited"
    for _ in range(4):
        assert client.get("/static/page.js").status_code == 200


def command_calls(app) -> dict[str, int]:
    """Redis's count of calls per command (those a script makes count too)."""
    stats = app.extensions["stapel"].redis.info("commandstats")
    return {name.removeprefix("cmdstat_"): row["calls"] for name, row in stats.items()}


def commands_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The calls per command from one command_calls to the next, less the INFO that read them."""
    ran = {name: n - before.get(name, 0) for name, n in after.items() if n != before.get(name)}
    ran.pop("info")
    return ran


def test_reads_take_the_limit_from_redis_in_leases_not_one_round_trip_each(make_app):
    app = make_app(rate_read="1600/minute")  # leases of LEASE_MAX (16) hits
    client, acme = app.test_client(), key_for(app, "acme")
    job = client.post("/v1/jobs", headers=acme, json=job_body()).get_json()
    assert client.get(job["links"]["self"], headers=acme).status_code == 200  # 1 of a lease
    before = command_calls(app)
    for _ in range(LEASE_MAX - 1):
        assert client.get(job["links"]["self"], headers=acme).status_code == 200
    spent = command_calls(app)
    response = client.get(job["links"]["self"], headers=acme)  # the next lease
    after = command_calls(app)
    assert commands_between(before, spent) == {}, "the rest of the lease is spent without Redis"
    ran = commands_between(spent, after)
    # one script: the window's counter raised by the lease, its time left read back
    assert ran.pop("evalsha", 0) + ran.pop("eval", 0) == 1, ran
    assert set(ran) <= {"incrby", "pttl", "expire"}, ran
    assert response.status_code == 200
    assert not any(name.startswith("X-RateLimit") for name, _ in response.headers.items())


def hits_served(limiters, item, scope="read", key="tenant:acme"):
    """Ask the limiters in turn until each refuses twice in a row; return how many were served."""
    served, refused = 0, {id(limiter): 0 for limiter in limiters}
    while min(refused.values()) < 2:
        for limiter in limiters:
            try:
                limiter.check([item], scope, key)
            except RateLimited:
                refused[id(limiter)] += 1
            else:
                served += 1
                refused[id(limiter)] = 0
    return served


@pytest.mark.parametrize("amount", [3, 40, 1000])
def test_processes_sharing_a_window_serve_exactly_its_limit(redis_client, redis_url, amount):
    # three web processes' limiters, each taking leases of its own
    limiters = [RateLimiter(redis_url) for _ in range(3)]
    item = parse(f"{amount}/hour")
    assert hits_served(limiters, item) == amount, "never more, and no hit lost in a lease"
    assert hits_served(limiters, item, key="tenant:globex") == amount, "another tenant's own"


@pytest.mark.slow
def test_a_lease_never_outlives_its_window(redis_client, redis_url):
    item = parse("320/5 seconds")  # leases of 16
    first, second = RateLimiter(redis_url), RateLimiter(redis_url)
    first.check([item], "read", "tenant:acme")  # takes a lease, keeps 15 hits of it
    window = f"{KEY_PREFIX}:{item.key_for('read', 'tenant:acme')}"
    assert redis_client.get(window) == b"16"
    wait_for(lambda: not redis_client.exists(window), 15, what="the window to end")
    # the new window starts now: the 15 hits left of the old lease must not be spent in it
    assert hits_served([first, second], item) == 320


def test_a_process_that_saw_its_window_full_refuses_without_redis(make_app):
    app = make_app(rate_read="2/minute")
    client, acme = app.test_client(), key_for(app, "acme")
    for _ in range(2):
        assert client.get("/v1/jobs", headers=acme).status_code == 200
    assert client.get("/v1/jobs", headers=acme).status_code == 429
    before = command_calls(app)
    for _ in range(20):
        refused = client.get("/v1/jobs", headers=acme)
        assert refused.status_code == 429 and 1 <= int(refused.headers["Retry-After"]) <= 60
    ran = commands_between(before, command_calls(app))
    assert ran.get("evalsha", 0) + ran.get("eval", 0) == 0, ran


def test_compat_dialects_and_v1_share_the_tenants_one_budget(make_app):
    """Two keys of one tenant, /v1 and DeepL's document upload: one submission window."""
    app = make_app(rate_submit="3/minute")
    client = app.test_client()
    first, second = key_for(app, "acme"), key_for(app, "acme")
    for _ in range(3):
        assert client.post("/v1/jobs", headers=first, json=job_body()).status_code == 202

    for key in (first, second):
        deepl = {"Authorization": key["Authorization"].replace("Bearer", "DeepL-Auth-Key")}
        response = client.post(
            "/deepl/v2/document",
            headers=deepl,
            data={
                "target_lang": "DE",
                "source_lang": "EN",
                "file": (io.BytesIO(b"Hi.\n"), "a.txt"),
            },
            content_type="multipart/form-data",
        )
        assert response.status_code == 429, response.get_data(as_text=True)
    assert client.post("/v1/jobs", headers=second, json=job_body()).status_code == 429
    other = key_for(app, "globex")
    assert client.post("/v1/jobs", headers=other, json=job_body()).status_code == 202
