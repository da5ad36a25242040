"""Metrics that match reality: counters summed over web processes, workers per pool."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stapel.settings import Settings
from workers.runtime import WorkerState, build_engine

ROOT = Path(__file__).resolve().parents[2]

COUNT = """
from stapel.metrics import HTTP_REQUESTS
HTTP_REQUESTS.labels("GET", "/v1/jobs", "200").inc({n})
"""

SCRAPE = """
import redis
from prometheus_client import generate_latest
from stapel.db import make_engine, make_session_factory
from stapel.metrics import web_registry
registry = web_registry(make_session_factory(make_engine({db!r})), redis.Redis.from_url({r!r}))
print(generate_latest(registry).decode())
"""


def _python(code: str, env: dict) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.process
def test_http_counters_are_summed_over_the_web_processes(tmp_path, database_url, redis_url):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for n in (3, 4):  # two web processes, each counting its own requests
        _python(COUNT.format(n=n), env)
    text = _python(SCRAPE.format(db=database_url, r=redis_url), env)
    line = 'stapel_http_requests_total{endpoint="/v1/jobs",method="GET",status="200"} 7.0'
    assert line in text
    assert "stapel_queue_depth" in text or "stapel_jobs" in text  # the DB view is there too


def test_a_worker_off_its_pool_queue_says_it_has_no_pool(model_root):
    settings = Settings().replace(model_root=model_root)
    state = WorkerState(settings, None, build_engine(settings), None, None)  # type: ignore[arg-type]
    state.queues = ("control",)
    assert state.snapshot()["pool"] == "" and state.snapshot()["budget"] == 0
    state.queues = ("cpu", "control")
    record = state.snapshot()
    assert (record["pool"], record["budget"], record["held"], record["waiting"]) == (
        "cpu",
        settings.worker_segments,
        0,
        [],
    )
