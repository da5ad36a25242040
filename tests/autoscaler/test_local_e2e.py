"""The local backend end to end: real Celery workers grow with a backlog and shrink after.

Jobs go in through the API; the loop (poll 0.5 s, delay 2 s) starts workers from min to
max and, once the load is gone and the delay has passed, warm-stops idle ones back to
min. Every job must succeed with every chunk claimed once: no running chunk was cut.
"""

from __future__ import annotations

import logging
import os
import threading

import pytest
from sqlalchemy import select

from autoscaler.backends.local import LocalBackend
from autoscaler.config import PoolLimits, PoolSettings
from autoscaler.loop import PoolLoop
from stapel.db import make_session_factory
from stapel.presence import read_all
from stapel.tables import Chunk
from tests.conftest import free_port
from tests.factories import job_body, sentences, wait_for

pytestmark = pytest.mark.e2e

POOL = PoolSettings("cpu", PoolLimits(min=1, max=3, standby=0, scale_down_delay_s=2), poll_s=0.5)
JOBS, SEGMENTS, CHUNK_SEGMENTS = 3, 600, 200
"""Nine chunks of about 2 s each on the tiny model: long enough to need more workers."""


@pytest.fixture
def settings_overrides(database_url, redis_url, model_root):
    """Small chunks, so a few short jobs make a backlog of several chunks."""
    return {
        "database_url": database_url,
        "redis_url": redis_url,
        "model_root": model_root,
        "chunk_segments": CHUNK_SEGMENTS,
    }


@pytest.fixture
def local_backend(database_url, redis_url, model_root, tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "STAPEL_MODEL_ROOT": str(model_root),
        "STAPEL_THREADS": "1",
    }
    backend = LocalBackend("cpu", concurrency=1, env=env, log_dir=tmp_path / "workers")
    yield backend
    if not backend.close(timeout_s=60):
        for proc in backend.stopping.values():
            proc.kill()
            proc.wait()
        pytest.fail("workers did not finish their warm shutdown within 60 s")


def test_backlog_grows_workers_to_max_then_back_to_min(
    app, client, auth, engine, redis_client, local_backend
):
    sessions = make_session_factory(engine)
    loop = PoolLoop(POOL, local_backend, sessions, redis_client)
    seen: list[int] = []
    real_tick = loop.tick

    def tick():
        decision = real_tick()
        seen.append(len(local_backend.procs))
        return decision

    loop.tick = tick
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(
            lambda: set(local_backend.procs) & set(read_all(redis_client)),
            timeout=30,
            what="the min worker to be up",
        )
        job_ids = []
        for n in range(JOBS):
            response = client.post(
                "/v1/jobs", json=job_body(sentences(SEGMENTS, seed=n)), headers=auth
            )
            assert response.status_code == 202, response.get_json()
            job_ids.append(response.get_json()["id"])
        wait_for(lambda: max(seen) == POOL.limits.max, timeout=20, what="workers at max")

        def statuses() -> list[str]:
            return [client.get(f"/v1/jobs/{j}", headers=auth).get_json()["status"] for j in job_ids]

        wait_for(
            lambda: all(s in ("succeeded", "failed") for s in statuses()),
            timeout=60,
            interval=0.5,
            what="every job to finish",
        )
        wait_for(
            lambda: local_backend.replicas() == POOL.limits.min and not local_backend.stopping,
            timeout=30,
            what="workers back at min",
        )
    finally:
        stop.set()
        thread.join()
    assert statuses() == ["succeeded"] * JOBS
    with sessions() as session:
        chunks = session.scalars(select(Chunk)).all()
    assert len(chunks) == JOBS * SEGMENTS // CHUNK_SEGMENTS
    assert {c.attempts for c in chunks} == {1}, "a chunk was claimed twice: one was cut"
    assert len({c.worker for c in chunks}) > 1, "the backlog was shared by several workers"


def test_a_worker_that_serves_nobody_gets_a_live_one_beside_it(
    app, client, auth, engine, redis_client, local_backend, caplog
):
    """The pool's one worker cannot reach the broker (it retries forever and never
    publishes its presence): the backend counts it, the load wants no more, and the
    job's chunk waits. The loop sees the queued work unserved and starts a second
    worker, which translates it; the first is left alone."""
    limits = PoolLimits(min=1, max=2, standby=0, scale_down_delay_s=300, unserved_grace_s=1)
    pool = PoolSettings("cpu", limits, poll_s=0.5)
    right_env = local_backend.env
    local_backend.env = {**right_env, "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    local_backend.scale(1, [])  # the wedged one
    (wedged,) = local_backend.procs
    local_backend.env = right_env
    loop = PoolLoop(pool, local_backend, make_session_factory(engine), redis_client)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    caplog.set_level(logging.WARNING, logger="autoscaler.loop")
    thread.start()
    try:
        response = client.post("/v1/jobs", json=job_body(sentences(20, seed=9)), headers=auth)
        assert response.status_code == 202, response.get_json()
        job_id = response.get_json()["id"]
        wait_for(
            lambda: (
                client.get(f"/v1/jobs/{job_id}", headers=auth).get_json()["status"]
                in ("succeeded", "failed")
            ),
            timeout=120,
            interval=0.5,
            what="the job to be translated by a worker started for it",
        )
    finally:
        stop.set()
        thread.join()
        local_backend.procs[wedged].kill()  # its warm shutdown would wait for a broker
    assert client.get(f"/v1/jobs/{job_id}", headers=auth).get_json()["status"] == "succeeded"
    assert loop.unserved_starts == 1 and len(local_backend.procs) == 2
    with make_session_factory(engine)() as session:
        workers = {c.worker for c in session.scalars(select(Chunk)).all()}
    assert workers and wedged not in workers
    assert "queued work has no live consumer, adding workers pool=cpu" in caplog.text
