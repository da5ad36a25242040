"""Locality: a job goes to the queue of workers that already hold its model."""

from __future__ import annotations

import pytest

from stapel.dispatch import route
from stapel.presence import ServedQueues, read_all, served_model_queues
from tests.factories import sentences, wait_for
from tests.workers_proc import WorkerProcess

RECORDS = {
    "cpu-1@a": {"pool": "cpu", "models": ["en-de"]},
    "gpu-1@b": {"pool": "gpu", "models": ["en-de", "de-en"]},
}


def test_served_model_queues():
    assert served_model_queues(RECORDS) == {"cpu.en-de", "gpu.en-de", "gpu.de-en"}
    assert served_model_queues({}) == set()


@pytest.mark.parametrize(
    ("pool", "pair", "queue"),
    [
        ("cpu", "en-de", "cpu.en-de"),
        ("cpu", "de-en", "cpu"),
        ("gpu", "de-en", "gpu.de-en"),
    ],
)
def test_route_prefers_a_served_model_queue(pool, pair, queue):
    assert route(pool, pair, served_model_queues(RECORDS)) == queue


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
