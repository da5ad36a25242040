"""Correctness under batching: merged and chunked runs give each job its own exact result."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from stapel.tables import Chunk
from tests.factories import sentences, wait_for
from tests.workers_proc import WorkerProcess
from workers.engine import Engine

pytestmark = pytest.mark.e2e
SETTINGS = {
    "STAPEL_MAX_DECODING_LENGTH": "24",
    "STAPEL_BATCH_TOKENS": "2048",
    "STAPEL_BATCH_WAIT_MS": "200",
}


@pytest.fixture
def worker(app, settings_overrides, tmp_path):
    env = {
        "DATABASE_URL": settings_overrides["database_url"],
        "REDIS_URL": settings_overrides["redis_url"],
        "STAPEL_MODEL_ROOT": str(settings_overrides["model_root"]),
        **SETTINGS,
    }
    proc = WorkerProcess(env, tmp_path, concurrency=8).start(app.extensions["stapel"].celery)
    yield proc
    proc.stop()


def alone(model_root, texts):
    engine = Engine(model_root, max_decoding_length=24, batch_tokens=2048, batch_wait_s=0)
    return engine.translate("en-de", texts)


def result_of(client, auth, job):
    wait_for(
        lambda: client.get(job["links"]["self"], headers=auth).get_json()["status"] == "succeeded",
        timeout=120,
        what=f"job {job['id']}",
    )
    docs = client.get(job["links"]["result"], headers=auth).get_json()["documents"]
    return [seg for doc in docs for seg in doc["segments"]]


def test_many_jobs_batched_together_equal_each_alone(client, auth, worker, model_root):
    texts = [sentences(1 + k % 5, seed=k) for k in range(16)]
    created = [
        client.post(
            "/v1/jobs", headers=auth, json={"source_lang": "en", "target_lang": "de", "segments": t}
        ).get_json()
        for t in texts
    ]
    results = [result_of(client, auth, job) for job in created]
    for got, t in zip(results, texts, strict=True):
        assert got == alone(model_root, t)
    merged = [
        int(n) for n in re.findall(r"batch model=en-de segments=\d+ jobs=(\d+)", worker.log())
    ]
    assert merged and max(merged) > 1  # some batch really held several jobs


def test_chunked_and_unchunked_runs_agree(app, client, auth, worker, model_root):
    texts = sentences(120, seed=3)
    whole = client.post(
        "/v1/jobs", headers=auth, json={"source_lang": "en", "target_lang": "de", "segments": texts}
    ).get_json()
    ext = app.extensions["stapel"]
    ext.settings = ext.settings.replace(chunk_segments=25)
    chunked = client.post(
        "/v1/jobs",
        headers=auth,
        json={
            "source_lang": "en",
            "target_lang": "de",
            "documents": [{"segments": texts[:50]}, {"segments": texts[50:]}],
        },
    ).get_json()
    with ext.sessions() as s:
        assert len(s.scalars(select(Chunk).where(Chunk.job_id == chunked["id"])).all()) == 5
    assert result_of(client, auth, chunked) == result_of(client, auth, whole)
    assert result_of(client, auth, whole) == alone(model_root, texts)


def test_a_full_worker_alone_keeps_its_chunks_in_line_and_holds_one_budget_at_a_time(
    app, client, auth, settings_overrides, model_root, tmp_path
):
    env = {
        "DATABASE_URL": settings_overrides["database_url"],
        "REDIS_URL": settings_overrides["redis_url"],
        "STAPEL_MODEL_ROOT": str(settings_overrides["model_root"]),
        **SETTINGS,
        "STAPEL_WORKER_SEGMENTS": "25",
        "STAPEL_DEFER_S": "0.05",
    }
    proc = WorkerProcess(env, tmp_path, concurrency=4).start(app.extensions["stapel"].celery)
    try:
        ext = app.extensions["stapel"]
        ext.settings = ext.settings.replace(chunk_segments=25)
        texts = sentences(100, seed=4)
        job = client.post(
            "/v1/jobs",
            headers=auth,
            json={"source_lang": "en", "target_lang": "de", "segments": texts},
        ).get_json()
        assert result_of(client, auth, job) == alone(model_root, texts)
        with ext.sessions() as s:
            attempts = s.scalars(select(Chunk.attempts).where(Chunk.job_id == job["id"])).all()
        assert sorted(attempts) == [1, 1, 1, 1]  # handing back is not an attempt
        log = proc.log_path.read_text()
        # Four chunks of 25 arrive at once; with room for 25 segments the worker runs
        # them one after another (each batch waits 200 ms for company). No other worker
        # has room, so the waiting ones stay in its line: nothing is handed back.
        events = re.findall(rf"chunk (claimed|done) logid={job['id']}", log)
        assert events == ["claimed", "done"] * 4
        assert "chunk deferred" not in log
    finally:
        proc.stop()
