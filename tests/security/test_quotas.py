"""Tenant quotas (segments per day, jobs in flight), /v1/usage, and fair share."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timezone

import pytest
import redis
from sqlalchemy import select

from stapel import broker, quotas
from stapel.db import make_session_factory
from stapel.keys import get_or_create_tenant
from stapel.tables import Chunk
from tests.conftest import free_port
from tests.factories import job_body
from tests.security.conftest import key_for


def test_segments_per_day_quota_is_429_naming_the_quota_and_reset(make_app):
    app = make_app(quota_segments_per_day=5)
    client, acme = app.test_client(), key_for(app, "acme")
    assert client.post("/v1/jobs", headers=acme, json=job_body(["a", "b", "c"])).status_code == 202
    response = client.post("/v1/jobs", headers=acme, json=job_body(["d", "e", "f"]))
    assert response.status_code == 429
    error = response.get_json()["error"]
    assert error["code"] == "quota_segments_per_day"
    assert "5 segments per day" in error["message"] and "resets at" in error["message"]
    assert int(response.headers["Retry-After"]) <= 86400
    usage = client.get("/v1/usage", headers=acme).get_json()
    assert usage["segments_today"] == 3 and usage["segments_limit"] == 5
    assert datetime.fromisoformat(usage["segments_reset_at"]) > datetime.now(timezone.utc)
    other = key_for(app, "globex")
    assert client.post("/v1/jobs", headers=other, json=job_body(["x"] * 5)).status_code == 202


def test_jobs_in_flight_quota_and_usage(make_app):
    app = make_app(quota_jobs_in_flight=2)
    client, acme = app.test_client(), key_for(app, "acme")
    ids = [
        client.post("/v1/jobs", headers=acme, json=job_body()).get_json()["id"] for _ in range(2)
    ]
    response = client.post("/v1/jobs", headers=acme, json=job_body())
    assert response.status_code == 429
    assert response.get_json()["error"]["code"] == "quota_jobs_in_flight"
    assert client.get("/v1/usage", headers=acme).get_json()["jobs_in_flight"] == 2
    assert client.post(f"/v1/jobs/{ids[0]}/cancel", headers=acme).status_code == 200
    assert client.post("/v1/jobs", headers=acme, json=job_body()).status_code == 202
    assert client.get("/v1/usage", headers=acme).get_json()["segments_today"] == 6, (
        "refused submissions are not counted"
    )


def test_an_idempotent_replay_uses_no_quota(make_app):
    app = make_app(quota_segments_per_day=2)
    client, acme = app.test_client(), key_for(app, "acme")
    headers = {**acme, "Idempotency-Key": "order-1"}
    first = client.post("/v1/jobs", headers=headers, json=job_body())
    again = client.post("/v1/jobs", headers=headers, json=job_body())
    assert (first.status_code, again.status_code) == (202, 200)
    assert client.get("/v1/usage", headers=acme).get_json()["segments_today"] == 2


def test_concurrent_admissions_never_overshoot(engine, redis_client, session):
    tenant = get_or_create_tenant(session, "acme").id
    session.commit()
    sessions = make_session_factory(engine)
    admitted, barrier = [], threading.Barrier(12)

    def submit():
        with sessions() as s:
            barrier.wait()
            try:
                with quotas.admit(redis_client, s, tenant, 3, segments_limit=20, jobs_limit=0):
                    admitted.append(1)
            except quotas.QuotaExceeded:
                pass

    threads = [threading.Thread(target=submit) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 6
    assert (
        quotas.usage(redis_client, session, tenant, segments_limit=20, jobs_limit=0).segments_today
        == 18
    )


def test_concurrent_submissions_never_overshoot_jobs_in_flight(make_app):
    app = make_app(quota_jobs_in_flight=5)
    acme = key_for(app, "acme")
    statuses, barrier = [], threading.Barrier(12)

    def submit():
        client = app.test_client()
        barrier.wait()
        statuses.append(client.post("/v1/jobs", headers=acme, json=job_body()).status_code)

    threads = [threading.Thread(target=submit) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [202] * 5 + [429] * 7
    usage = app.test_client().get("/v1/usage", headers=acme).get_json()
    assert usage["jobs_in_flight"] == 5


@pytest.mark.parametrize(
    ("priority", "flying", "step", "expected"),
    [
        (5, 0, 5, 5),
        (5, 4, 5, 5),
        (5, 5, 5, 4),
        (5, 12, 5, 3),
        (9, 100, 5, 0),
        (0, 0, 5, 0),
        (7, 50, 0, 7),
    ],
)
def test_fair_priority(priority, flying, step, expected):
    assert quotas.fair_priority(priority, flying, step) == expected


def _dispatch_order(redis_client, session, queue="cpu"):
    """Return job ids in the order a worker would take their tasks from the queue."""
    order = []
    for prio in range(10):
        key = queue if prio == 0 else f"{queue}:{prio}"
        for raw in reversed(redis_client.lrange(key, 0, -1)):  # LPUSH + BRPOP: oldest last
            message = json.loads(raw)
            chunk_id = message["headers"]["argsrepr"].strip("[]'\"")
            order.append(session.scalar(select(Chunk.job_id).where(Chunk.id == chunk_id)))
    return order


def test_a_flooding_tenant_cannot_starve_another(make_app, session, redis_client):
    app = make_app(fair_share_step=2)
    client = app.test_client()
    flood, late = key_for(app, "flood"), key_for(app, "late")
    a_ids = [
        client.post("/v1/jobs", headers=flood, json=job_body([f"a{n}"])).get_json()["id"]
        for n in range(12)
    ]
    b_id = client.post("/v1/jobs", headers=late, json=job_body(["b"])).get_json()["id"]
    order = _dispatch_order(redis_client, session)
    assert sorted(order) == sorted([*a_ids, b_id]), "every job is queued once"
    position = order.index(b_id)
    assert position <= 2, f"B's job is taken after only {position} of A's 12 jobs"
    assert order[:position] == a_ids[:position], "A's own jobs keep their arrival order"


def test_the_reservation_script_is_loaded_again_after_redis_lost_it(make_app):
    app = make_app(quota_segments_per_day=5)
    client, acme = app.test_client(), key_for(app, "acme")
    redis_client = app.extensions["stapel"].redis
    assert client.post("/v1/jobs", headers=acme, json=job_body(["a", "b"])).status_code == 202
    redis_client.script_flush()  # as a restarted Redis without persistence would be
    assert not redis_client.script_exists(quotas._SHAS[quotas._RESERVE])[0]
    assert client.post("/v1/jobs", headers=acme, json=job_body(["c", "d"])).status_code == 202
    assert redis_client.script_exists(quotas._SHAS[quotas._RESERVE])[0]
    assert client.get("/v1/usage", headers=acme).get_json()["segments_today"] == 4
    response = client.post("/v1/jobs", headers=acme, json=job_body(["e", "f"]))
    assert response.status_code == 429, "the quota still holds"


def test_a_replay_refused_by_a_quota_still_gets_its_job(make_app):
    app = make_app(quota_jobs_in_flight=1)
    client, acme = app.test_client(), key_for(app, "acme")
    headers = {**acme, "Idempotency-Key": "order-7"}
    first = client.post("/v1/jobs", headers=headers, json=job_body())
    assert first.status_code == 202  # queued (no worker here): the one job in flight
    refused = client.post("/v1/jobs", headers=acme, json=job_body())
    assert refused.status_code == 429, "the quota is used up"
    again = client.post("/v1/jobs", headers=headers, json=job_body())
    assert again.status_code == 200 and again.get_json()["id"] == first.get_json()["id"]
    assert client.get("/v1/usage", headers=acme).get_json()["jobs_in_flight"] == 1


def test_the_admission_counts_only_as_far_as_its_limit_and_fair_share_need(
    make_app, session, redis_client
):
    app = make_app(quota_jobs_in_flight=0, fair_share_step=2)
    client, acme = app.test_client(), key_for(app, "acme")
    for n in range(12):
        assert client.post("/v1/jobs", headers=acme, json=job_body([f"a{n}"])).status_code == 202
    tenant = get_or_create_tenant(session, "acme").id
    assert quotas.in_flight(session, tenant) == 12
    assert quotas.in_flight(session, tenant, up_to=5) == 5
    assert quotas.in_flight(session, tenant, up_to=0) == 0
    with quotas.admit(
        redis_client, session, tenant, 1, segments_limit=0, jobs_limit=20, count_up_to=3
    ) as admission:
        assert admission.in_flight == 12, "exact below the jobs limit"
    refused = quotas.admit(redis_client, session, tenant, 1, segments_limit=0, jobs_limit=8)
    with pytest.raises(quotas.QuotaExceeded, match=r"\(8 in flight\)"), refused:
        pass
    with quotas.admit(
        redis_client, session, tenant, 1, segments_limit=0, jobs_limit=0, count_up_to=10
    ) as admission:
        assert admission.in_flight == 10, "counted to what fair share needs"
    # priority 5 at a step of 2 reaches 0 after 10 jobs: the 12 in flight sink it to 0
    late = client.post("/v1/jobs", headers=acme, json=job_body(["late"], priority=5))
    assert late.status_code == 202
    order = _dispatch_order(redis_client, session)
    assert order[-1] == late.get_json()["id"], "the flooding tenant's new job goes last"


@pytest.mark.slow
def test_every_submission_ends_its_place_among_the_pending(make_app, monkeypatch):
    """The first chunk's send ends it (one round trip); a replay or a send the broker
    refused ends it too, or the stored job would count twice until the place lapsed."""
    app = make_app(quota_jobs_in_flight=3, chunk_segments=2)
    client, acme = app.test_client(), key_for(app, "acme")
    ext = app.extensions["stapel"]

    def places() -> int:
        return sum(ext.redis.zcard(key) for key in ext.redis.scan_iter("stapel:quota:*:pending"))

    headers = {**acme, "Idempotency-Key": "three-chunks"}
    assert client.post("/v1/jobs", headers=headers, json=job_body(["a"] * 5)).status_code == 202
    assert places() == 0
    assert client.post("/v1/jobs", headers=headers, json=job_body(["a"] * 5)).status_code == 200
    assert places() == 0
    # the broker unreachable (the quota's Redis answering): the job is stored all the same
    dead = redis.Redis(port=free_port(), socket_connect_timeout=0.5)
    monkeypatch.setitem(broker._publishers, ext.celery, dead)
    assert client.post("/v1/jobs", headers=acme, json=job_body(["b"])).status_code == 202
    assert places() == 0
    assert client.post("/v1/jobs", headers=acme, json=job_body(["c"])).status_code == 202
    refused = client.post("/v1/jobs", headers=acme, json=job_body(["d"]))
    assert refused.get_json()["error"]["code"] == "quota_jobs_in_flight"
    assert places() == 0
