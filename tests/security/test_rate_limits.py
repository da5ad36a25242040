"""Rate limits per tenant, shared in Redis; probes and docs are not limited."""

from __future__ import annotations

import logging
import uuid

from tests.factories import job_body, sentences
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


def test_a_limited_read_costs_one_redis_round_trip(make_app):
    app = make_app(rate_read="100/minute")
    client, acme = app.test_client(), key_for(app, "acme")
    job = client.post("/v1/jobs", headers=acme, json=job_body()).get_json()
    assert client.get(job["links"]["self"], headers=acme).status_code == 200  # key now known
    before = command_calls(app)
    response = client.get(job["links"]["self"], headers=acme)
    after = command_calls(app)
    assert response.status_code == 200
    ran = {name: n - before.get(name, 0) for name, n in after.items() if n != before.get(name)}
    ran.pop("info")  # the call that read the counts
    # one script: the window's counter raised with its expiry (its INCRBY counts apart);
    # no read of the window's count and expiry (the X-RateLimit headers cost those two)
    assert ran.pop("evalsha", 0) + ran.pop("eval", 0) == 1, ran
    assert set(ran) <= {"incrby", "expire"}, ran
    assert not any(name.startswith("X-RateLimit") for name, _ in response.headers.items())
