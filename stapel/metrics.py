"""Prometheus metrics, all named `stapel_*`.

Workers count what they do (segments, stage times, batches, model loads) in their own
process and serve them on an exporter port (STAPEL_METRICS_PORT, one port per worker
process; the next free port is taken when it is busy). The web serves `/metrics`: its
own counters plus gauges read from the database, presence records and the autoscaler's
last decisions at scrape time (jobs by state and pool, queue depth, heartbeat age,
workers and models, desired vs actual replicas), so any web replica gives the same view.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator

import redis
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from stapel import tracer
from stapel.celery_config import POOL_QUEUES
from stapel.presence import read_all
from stapel.settings import current
from stapel.states import ACTIVE, Status
from stapel.tables import CacheEntry, Chunk, Job, Memory
from stapel.unserved import unserved_chunks

log = logging.getLogger(__name__)

AUTOSCALER_KEY = "stapel:autoscaler:"
"""Redis key prefix of each pool's last autoscaler decision (read by the web's /metrics)."""
AUTOSCALER_TTL_S = 120

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)

STAGE_SECONDS = Histogram(
    "stapel_stage_seconds",
    "Time spent per stage (per chunk or batch)",
    ["stage"],
    buckets=LATENCY_BUCKETS,
)
SEGMENTS = Counter("stapel_segments_translated_total", "Segments translated", ["pool", "pair"])
CHUNKS = Counter("stapel_chunks_total", "Chunks a worker ended, by outcome", ["pool", "outcome"])
TAKEN_ALONG = Counter(
    "stapel_taken_along_total",
    "Chunk messages a task took along from its queue instead of Celery delivering each",
    ["pool"],
)
BATCH_SIZE = Histogram(
    "stapel_batch_size",
    "Segments per translated batch",
    ["pair"],
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
)
BATCH_FILL = Histogram(
    "stapel_batch_fill_ratio",
    "Real tokens / padded tokens per batch",
    ["pair"],
    buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
)
MODEL_CACHE = Counter(
    "stapel_model_cache_total",
    "Chunks whose model was already loaded (hit) or had to be loaded (miss)",
    ["pair", "result"],
)
MODEL_LOADS = Counter("stapel_model_loads_total", "Models loaded by a worker", ["pair"])
WATCHDOG = Counter("stapel_watchdog_actions_total", "What the watchdog did to chunks", ["action"])
LOOKUPS = Counter(
    "stapel_lookups_total",
    "Segments (memory) or pieces (cache, dedup in flight) looked up, by whether reused",
    ["source", "result"],
)
HTTP_REQUESTS = Counter(
    "stapel_http_requests_total",
    "HTTP requests served by the web",
    ["method", "endpoint", "status"],
)


def observe_stage(stage: str, seconds: float) -> None:
    """Record one stage's duration in the histogram and the tracer's window."""
    STAGE_SECONDS.labels(stage).observe(seconds)
    tracer.WINDOW.stage(stage, seconds)


def observe_batch(pair: str, segments: int, real_tokens: int, padded_tokens: int) -> None:
    """Record one translated batch: its size and how full its padded shape was."""
    fill = real_tokens / padded_tokens if padded_tokens else 1.0
    BATCH_SIZE.labels(pair).observe(segments)
    BATCH_FILL.labels(pair).observe(fill)
    tracer.WINDOW.batch(segments, fill)


def observe_segments(pool: str, pair: str, count: int) -> None:
    """Count segments written by this worker."""
    SEGMENTS.labels(pool, pair).inc(count)
    tracer.WINDOW.segments(count)


def observe_lookup(source: str, hits: int, total: int) -> None:
    """Count a lookup in a memory, the MT cache or the batcher's pieces in flight (dedup).

    The hit ratio is hit / (hit + miss) of stapel_lookups_total per source.
    """
    if total:
        LOOKUPS.labels(source, "hit").inc(hits)
        LOOKUPS.labels(source, "miss").inc(total - hits)
        tracer.WINDOW.lookup(source, hits, total)


def start_exporter(port: int, addr: str | None = None, tries: int = 16) -> int | None:
    """Serve this process's metrics on addr:port (or the next free port); return the port.

    addr defaults to STAPEL_METRICS_BIND (127.0.0.1): an exporter is reachable from other
    hosts only where that is asked for.
    """
    addr = current().metrics_bind if addr is None else addr
    for candidate in range(port, port + tries):
        try:
            start_http_server(candidate, addr=addr)
        except OSError:
            continue
        log.info("metrics exporter listening addr=%s port=%d", addr, candidate)
        return candidate
    log.warning("metrics exporter not started: ports %d-%d busy", port, port + tries - 1)
    return None


def publish_decision(
    client: redis.Redis | None, pool: str, current: int, desired: int, unserved_starts: int = 0
) -> None:
    """Store a pool's last autoscaler decision for the web's /metrics (best effort).

    unserved_starts counts the workers the autoscaler added, since it started, because
    the pool's queued work had no live consumer.
    """
    if client is None:
        return
    record = {
        "current": current,
        "desired": desired,
        "unserved_starts": unserved_starts,
        "at": time.time(),
    }
    try:
        client.set(AUTOSCALER_KEY + pool, json.dumps(record), ex=AUTOSCALER_TTL_S)
    except redis.RedisError as exc:
        log.debug("autoscaler decision not published pool=%s error=%s", pool, exc)


class StateCollector(Collector):
    """Gauges read at scrape time from the DB, presence records and autoscaler decisions."""

    def __init__(self, sessions: sessionmaker[Session], client: redis.Redis) -> None:
        self.sessions, self.redis = sessions, client

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("stapel_jobs", "Jobs by state and pool", labels=["state", "pool"])
        depth = GaugeMetricFamily(
            "stapel_queue_depth", "Chunks queued (waiting for a worker)", labels=["pool"]
        )
        running = GaugeMetricFamily("stapel_chunks_running", "Chunks running", labels=["pool"])
        age = GaugeMetricFamily(
            "stapel_heartbeat_age_seconds", "Oldest heartbeat of a running chunk", labels=["pool"]
        )
        with self.sessions() as session:
            for state, pool, count in session.execute(
                select(Job.status, Job.pool, func.count()).group_by(Job.status, Job.pool)
            ):
                jobs.add_metric([state, pool], count)
            now = time.time()
            for pool, status, count, oldest in session.execute(
                select(Chunk.pool, Chunk.status, func.count(), func.min(Chunk.heartbeat_at))
                .where(Chunk.status.in_(ACTIVE))
                .group_by(Chunk.pool, Chunk.status)
            ):
                if status == Status.QUEUED:
                    depth.add_metric([pool], count)
                else:
                    running.add_metric([pool], count)
                    if oldest is not None:
                        age.add_metric([pool], max(0.0, now - _epoch(oldest)))
        yield from (jobs, depth, running, age)
        yield from self._sizes()
        yield from self._live()

    def _sizes(self) -> Iterator[GaugeMetricFamily]:
        cache = GaugeMetricFamily("stapel_mt_cache_entries", "Entries in the MT cache")
        memory = GaugeMetricFamily(
            "stapel_memory_entries", "Translation units in all tenants' memories"
        )
        with self.sessions() as session:
            cache.add_metric([], session.scalar(select(func.count()).select_from(CacheEntry)) or 0)
            memory.add_metric([], session.scalar(select(func.sum(Memory.entries))) or 0)
        yield from (cache, memory)

    def _live(self) -> Iterator[Metric]:
        workers = GaugeMetricFamily(
            "stapel_workers", "Live workers (presence records)", labels=["pool"]
        )
        models = GaugeMetricFamily(
            "stapel_worker_models_loaded", "Models loaded per worker", labels=["worker", "pool"]
        )
        busy = GaugeMetricFamily(
            "stapel_worker_busy_tasks", "Tasks running per worker", labels=["worker", "pool"]
        )
        desired = GaugeMetricFamily(
            "stapel_autoscaler_desired_replicas", "Replicas the autoscaler wants", labels=["pool"]
        )
        actual = GaugeMetricFamily(
            "stapel_autoscaler_replicas", "Replicas the autoscaler saw", labels=["pool"]
        )
        rescued = CounterMetricFamily(
            "stapel_autoscaler_unserved_starts",
            "Workers the autoscaler added because queued work had no live consumer",
            labels=["pool"],
        )
        unserved = GaugeMetricFamily(
            "stapel_queued_unserved_chunks",
            "Chunks queued in a pool that no live worker consumes (stapel.unserved)",
            labels=["pool"],
        )
        try:
            records = read_all(self.redis)
            decisions = {}
            for key in self.redis.scan_iter(match=AUTOSCALER_KEY + "*"):
                raw = self.redis.get(key)
                name = key.decode() if isinstance(key, bytes) else key
                if raw:
                    decisions[name[len(AUTOSCALER_KEY) :]] = json.loads(raw)
        except (redis.RedisError, ValueError) as exc:
            log.warning("metrics cannot read redis error=%s", type(exc).__name__)
            return
        per_pool: dict[str, int] = {}
        for name, record in records.items():
            pool = str(record.get("pool") or "")
            if not pool:  # a control worker: it serves no pool's queue
                continue
            per_pool[pool] = per_pool.get(pool, 0) + 1
            models.add_metric([name, pool], len(record.get("models") or ()))
            busy.add_metric([name, pool], int(record.get("busy") or 0))
        for pool, count in per_pool.items():
            workers.add_metric([pool], count)
        for pool, decision in decisions.items():
            desired.add_metric([pool], decision["desired"])
            actual.add_metric([pool], decision["current"])
            rescued.add_metric([pool], decision.get("unserved_starts", 0))
        with self.sessions() as session:
            waiting = unserved_chunks(session, records)
        for pool in sorted({*POOL_QUEUES, *waiting}):
            unserved.add_metric([pool], waiting.get(pool, 0))
        yield from (workers, models, busy, desired, actual, rescued, unserved)


def _epoch(value) -> float:
    return value.timestamp()


MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's multiprocess mode: set (to an empty folder) before the web starts."""


def web_registry(sessions: sessionmaker[Session], client: redis.Redis) -> CollectorRegistry:
    """Return the registry /metrics serves: the web's counters plus StateCollector.

    With several web processes each counts its own requests; with PROMETHEUS_MULTIPROC_DIR
    set (the Procfile's `web` does) every process writes its counters to files there and
    any process's /metrics sums them all, so a scrape sees the whole web, not one process.
    """
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get(MULTIPROC_ENV):
        MultiProcessCollector(registry)
    else:
        registry.register(_Default())
    registry.register(StateCollector(sessions, client))
    return registry


class _Default(Collector):
    """Re-export the process-wide default registry inside another registry."""

    def collect(self):
        return REGISTRY.collect()
