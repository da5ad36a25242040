"""/metrics: DB gauges at scrape time, autoscaler decisions; the tracer's blocks."""

from __future__ import annotations

import logging

import pytest
from prometheus_client.parser import text_string_to_metric_families

from stapel import logs, metrics, tracer
from stapel.presence import publish
from tests.factories import job_body


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_show_jobs_queue_depth_workers_and_autoscaler(client, auth, redis_client):
    for _ in range(2):
        assert client.post("/v1/jobs", json=job_body(), headers=auth).status_code == 202
    publish(redis_client, "cpu-1@host", {"pool": "cpu", "busy": 1, "models": ["en-de"]})
    publish(redis_client, "control@host", {"pool": "", "busy": 0, "models": []})  # in no pool
    metrics.publish_decision(redis_client, "cpu", current=1, desired=3, unserved_starts=2)
    response = client.get("/metrics")
    assert response.status_code == 200 and response.mimetype.startswith("text/plain")
    got = samples(response.get_data(as_text=True))
    assert got[("stapel_jobs", (("pool", "cpu"), ("state", "queued")))] == 2
    assert got[("stapel_queue_depth", (("pool", "cpu"),))] == 2
    assert got[("stapel_workers", (("pool", "cpu"),))] == 1
    assert got[("stapel_worker_models_loaded", (("pool", "cpu"), ("worker", "cpu-1@host")))] == 1
    assert got[("stapel_autoscaler_desired_replicas", (("pool", "cpu"),))] == 3
    assert got[("stapel_autoscaler_replicas", (("pool", "cpu"),))] == 1
    assert got[("stapel_autoscaler_unserved_starts_total", (("pool", "cpu"),))] == 2
    posted = (
        "stapel_http_requests_total",
        (("endpoint", "/v1/jobs"), ("method", "POST"), ("status", "202")),
    )
    assert got[posted] >= 2


def test_http_requests_count_each_request_and_bound_the_method_label(client, auth):
    def count(method: str, endpoint: str, status: str) -> float:
        got = samples(client.get("/metrics").get_data(as_text=True))
        labels = (("endpoint", endpoint), ("method", method), ("status", status))
        return got.get(("stapel_http_requests_total", labels), 0.0)

    before = count("GET", "/v1/languages", "200")
    for _ in range(3):
        assert client.get("/v1/languages", headers=auth).status_code == 200
    assert count("GET", "/v1/languages", "200") == before + 3
    odd = [f"X{i}" for i in range(5)]  # methods a client makes up: one label, not five
    before = count("other", "other", "405")
    for method in odd:
        assert client.open("/v1/languages", method=method, headers=auth).status_code == 405
    text = client.get("/metrics").get_data(as_text=True)
    assert count("other", "other", "405") == before + len(odd)
    assert not any(f'method="{m}"' in text for m in odd)


@pytest.mark.parametrize(
    "values, q, expected",
    [
        ([], 50, 0.0),
        ([5.0], 99, 5.0),
        ([1, 2, 3, 4], 50, 2),
        ([1, 2, 3, 4], 90, 4),
        (list(range(1, 101)), 95, 95),
        (list(range(1, 101)), 99, 99),
    ],
)
def test_percentile_by_nearest_rank(values, q, expected):
    assert tracer.percentile(values, q) == expected


def test_tracer_block_has_every_section():
    window = tracer.Window()
    window.stage("translate", 0.2)
    window.stage("translate", 0.4)
    window.batch(8, 0.5)
    window.segments(30)
    cluster = tracer.Cluster(
        finished=4,
        succeeded=3,
        latencies=[1, 2, 3, 10],
        queued={"cpu": 5, "gpu": 1},
        models={"cpu@a": ["en-de"]},
    )
    block = tracer.format_block("cpu@a", 10, window, cluster)
    assert "stage=translate count=2 total_s=0.600 avg_ms=300.0" in block
    assert "stage=queue_wait count=0" in block and "stage=write count=0" in block
    assert "jobs_per_s=0.400 segments_per_s=3.00" in block
    assert "success_ratio=0.750" in block and "p50=2.00 p90=10.00" in block
    assert "queue_depth cpu=5 gpu=1" in block
    assert "batches count=1 avg_size=8.0 max_size=8 fill_ratio=0.50" in block
    assert "worker=cpu@a models=en-de" in block


def test_tracer_writes_blocks_to_the_tracer_file(app, client, auth, tmp_path):
    assert client.post("/v1/jobs", json=job_body(), headers=auth).status_code == 202
    ext = app.extensions["stapel"]
    log = logging.getLogger(logs.TRACER_LOGGER)
    handler = logging.FileHandler(tmp_path / "stapel.tracer")
    log.addHandler(handler)
    try:
        metrics.observe_stage("write", 0.01)
        block = tracer.Tracer("web", ext.sessions, ext.redis, interval_s=60).write_block()
    finally:
        log.removeHandler(handler)
        handler.close()
    assert "queue_depth cpu=1" in block and "stage=write count=1" in block
    assert "tracer process=web" in (tmp_path / "stapel.tracer").read_text()
    assert tracer.WINDOW.take().stages == {}, "a block starts a new window"


def test_lookups_count_hits_and_misses_and_reach_the_tracer_block():
    before = metrics.LOOKUPS.labels("cache", "hit")._value.get()
    tracer.WINDOW.take()
    metrics.observe_lookup("cache", 3, 4)
    assert metrics.LOOKUPS.labels("cache", "hit")._value.get() == before + 3
    block = tracer.format_block("w", 60, tracer.WINDOW.take(), tracer.Cluster())
    assert "lookup source=cache hits=3 looked_up=4 hit_ratio=0.750" in block
