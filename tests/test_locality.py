"""Locality as a preference: a model queue while its workers have room, else the pool."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select

from stapel.dispatch import route
from stapel.presence import (
    ServedQueues,
    agreed_fingerprint,
    model_room,
    read_all,
    reserved_task_ids,
)
from stapel.tables import Chunk, Job, Segment
from tests.factories import sentences, wait_for
from tests.workers_proc import WorkerProcess

RECORDS = {
    "cpu-1@a": {"pool": "cpu", "models": ["en-de"], "budget": 4000, "held": 2000},
    "cpu-2@a": {"pool": "cpu", "models": ["en-de"], "budget": 4000, "held": 4000},
    "gpu-1@b": {"pool": "gpu", "models": ["en-de", "de-en"], "budget": 4000},
    "gpu-2@b": {
        "pool": "gpu",
        "models": ["fr-de"],
        "budget": 4000,
        "held": 2000,
        "waiting_segments": 2000,
        "waiting": ["t1", "t2"],
    },
    "control@c": {"pool": "", "models": [], "budget": 0},
}


def test_model_room_is_the_roomiest_holder_of_each_model_queue():
    assert model_room(RECORDS) == {
        "cpu.en-de": 2000,
        "gpu.en-de": 4000,
        "gpu.de-en": 4000,
        "gpu.fr-de": 0,
    }
    assert model_room({}) == {}
    assert reserved_task_ids(RECORDS) == {"t1", "t2"}


def test_a_model_queue_has_a_fingerprint_only_while_its_live_holders_agree():
    def record(pool: str, fingerprints: dict) -> dict:
        return {"pool": pool, "models": list(fingerprints), "fingerprints": fingerprints}

    room = model_room(
        {
            "cpu-1@a": record("cpu", {"en-de": "f1", "de-en": "f2"}),
            "cpu-2@a": record("cpu", {"en-de": "f1", "de-en": "f3"}),  # de-en rolling out
            "cpu-3@a": {"pool": "cpu", "models": ["fr-de"]},  # an older worker: says none
            "gpu-1@b": record("gpu", {"en-de": "f4"}),
        }
    )
    assert room.fingerprints == {"cpu.en-de": "f1", "gpu.en-de": "f4"}
    assert agreed_fingerprint(room, "cpu.en-de") == "f1"
    assert agreed_fingerprint(room, "cpu.de-en") is None
    assert agreed_fingerprint(room, "cpu.fr-de") is None
    assert agreed_fingerprint({"cpu.en-de": 10}, "cpu.en-de") is None  # a hand-back's room


@pytest.mark.parametrize(
    ("pool", "pair", "segments", "queue"),
    [
        ("cpu", "en-de", 2000, "cpu.en-de"),  # a holder has room for it
        ("cpu", "en-de", 2001, "cpu"),  # no holder has room: any worker of the pool
        ("cpu", "de-en", 10, "cpu"),  # nobody holds it
        ("gpu", "de-en", 4000, "gpu.de-en"),
        ("gpu", "fr-de", 1, "gpu"),  # its holder's line is full
    ],
)
def test_route_prefers_a_model_queue_only_while_it_has_room(pool, pair, segments, queue):
    assert route(pool, pair, segments, model_room(RECORDS)) == queue


def test_a_hand_back_passes_no_room_and_goes_to_the_pool_queue():
    assert route("cpu", "en-de", 1, {}) == "cpu"


def test_the_served_view_is_spent_so_a_burst_is_not_promised_the_same_room(redis_client):
    from stapel.presence import publish

    for name, record in RECORDS.items():
        publish(redis_client, name, record)
    served = ServedQueues(redis_client, cache_s=60)
    assert served.take_elsewhere("cpu", "cpu-2@a", 2000)  # cpu-1 has 2000 free
    assert not served.take_elsewhere("cpu", "cpu-2@a", 1)  # now spent
    assert not served.take_elsewhere("cpu", "cpu-1@a", 1)  # cpu-2 is full
    assert not served.take_elsewhere("", "cpu-1@a", 1)  # the control worker offers none


def test_submits_fill_a_warm_workers_room_then_go_to_the_pool_queue(
    app, client, auth, redis_client
):
    from stapel.presence import publish

    redis_client.flushdb()
    ext = app.extensions["stapel"]
    ext.settings = ext.settings.replace(chunk_segments=2)
    publish(redis_client, "cpu-1@a", {"pool": "cpu", "models": ["en-de"], "budget": 6})
    ext.served = ServedQueues(redis_client, cache_s=60)  # one view for the whole burst
    for _ in range(2):
        body = {"source_lang": "en", "target_lang": "de", "segments": sentences(4)}
        assert client.post("/v1/jobs", headers=auth, json=body).status_code == 202
    lengths = {
        q: sum(redis_client.llen(k) for k in [q, *(f"{q}:{p}" for p in range(1, 10))])
        for q in ("cpu.en-de", "cpu")
    }
    assert lengths == {"cpu.en-de": 3, "cpu": 1}  # room for 6 segments: three chunks of 2


@pytest.mark.e2e
def test_warm_worker_gets_its_pairs_jobs_through_the_model_queue(
    app, client, auth, settings_overrides, redis_client, tmp_path
):
    env = {
        "DATABASE_URL": settings_overrides["database_url"],
        "REDIS_URL": settings_overrides["redis_url"],
        "STAPEL_MODEL_ROOT": str(settings_overrides["model_root"]),
        "STAPEL_PRELOAD": "en-de",
        "STAPEL_MAX_DECODING_LENGTH": "16",
    }
    worker = WorkerProcess(env, tmp_path).start(app.extensions["stapel"].celery)
    try:
        wait_for(
            lambda: "en-de" in read_all(redis_client).get(worker.name, {}).get("models", []),
            timeout=30,
            what="presence with en-de loaded",
        )
        ext = app.extensions["stapel"]
        ext.served = ServedQueues(redis_client)
        warm = client.post(
            "/v1/jobs",
            headers=auth,
            json={"source_lang": "en", "target_lang": "de", "segments": sentences(3)},
        ).get_json()
        cold = client.post(
            "/v1/jobs",
            headers=auth,
            json={"source_lang": "de", "target_lang": "en", "segments": sentences(2)},
        ).get_json()
        for job in (warm, cold):
            wait_for(
                lambda j=job: (
                    client.get(j["links"]["self"], headers=auth).get_json()["status"] == "succeeded"
                ),
                timeout=60,
                what="job",
            )
        log = worker.log()
        assert f"logid={warm['id']} chunk=0 attempt=1 worker={worker.name} queue=cpu.en-de" in log
        assert f"logid={cold['id']} chunk=0 attempt=1 worker={worker.name} queue=cpu\n" in log
        assert "joined model queue queue=cpu.de-en" in log  # loaded on demand, then joined
    finally:
        worker.stop()


JOBS = 12


def _claimed_by(ext, worker: str) -> int:
    with ext.sessions() as s:
        return s.scalar(select(func.count()).select_from(Chunk).where(Chunk.worker == worker))


@pytest.mark.e2e
def test_a_second_worker_beside_a_warm_full_one_takes_work(
    app, client, auth, settings_overrides, redis_client, tmp_path, record_property
):
    """A warm worker's model queue and hand-backs must not keep a new worker idle."""
    env = {
        "DATABASE_URL": settings_overrides["database_url"],
        "REDIS_URL": settings_overrides["redis_url"],
        "STAPEL_MODEL_ROOT": str(settings_overrides["model_root"]),
        "STAPEL_MAX_DECODING_LENGTH": "64",
        "STAPEL_BATCH_TOKENS": "512",
        "STAPEL_WORKER_SEGMENTS": "200",  # one chunk at a time
        "STAPEL_DEFER_S": "0.5",
    }
    ext = app.extensions["stapel"]
    ext.settings = ext.settings.replace(chunk_segments=200)
    ext.served = ServedQueues(redis_client)
    warm = WorkerProcess({**env, "STAPEL_PRELOAD": "en-de"}, tmp_path, concurrency=8)
    warm.start(ext.celery)
    new = WorkerProcess(env, tmp_path, concurrency=8)
    try:
        wait_for(
            lambda: read_all(redis_client).get(warm.name, {}).get("models") == ["en-de"],
            timeout=30,
            what="the warm worker's presence",
        )
        jobs = [
            client.post(
                "/v1/jobs",
                headers=auth,
                json={"source_lang": "en", "target_lang": "de", "segments": sentences(1000, i)},
            ).get_json()
            for i in range(JOBS)
        ]
        wait_for(lambda: _claimed_by(ext, warm.name), timeout=30, what="the warm worker")
        started = time.monotonic()
        new.start(ext.celery)
        wait_for(lambda: _claimed_by(ext, new.name), timeout=60, what="the new worker's claim")
        record_property("second_worker_first_claim_s", round(time.monotonic() - started, 2))
        for job in jobs:
            wait_for(
                lambda j=job: (
                    client.get(j["links"]["self"], headers=auth).get_json()["status"] == "succeeded"
                ),
                timeout=180,
                what="job",
            )
        with ext.sessions() as s:
            attempts = s.scalars(select(Chunk.attempts)).all()
            translated = s.scalar(
                select(func.count()).select_from(Segment).where(Segment.target.is_not(None))
            )
            active = s.scalar(
                select(func.count()).select_from(Job).where(Job.status != "succeeded")
            )
        assert set(attempts) == {1}  # handing back is not an attempt; nothing was retried
        assert (translated, active) == (JOBS * 1000, 0)
        logs = warm.log_path.read_text() + new.log_path.read_text()
        assert all(
            logs.count(f"chunk done logid={j['id']} chunk={i} ") == 1
            for j in jobs
            for i in range(4)
        )
        assert _claimed_by(ext, new.name) >= 2
    finally:
        new.stop()
        warm.stop()
