"""The tracer log: every STAPEL_TRACER_S seconds a block of metrics in `stapel.tracer`.

A block holds this process's per-stage times (queue wait, tokenize, translate, write),
segments/s and batch sizes and fill, plus the cluster view read from the DB and presence
records: jobs/s, success ratio, job latency percentiles, queue depth per pool and the
models each worker holds. Workers run a tracer thread when STAPEL_LOG_DIR is set.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta

import redis
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from stapel.logs import TRACER_LOGGER
from stapel.presence import read_all
from stapel.states import Status
from stapel.tables import Chunk, Job, utcnow

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 60.0


def percentile(values: list[float], q: float) -> float:
    """Return the q-th percentile (0-100) of values by nearest rank; 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


@dataclass
class Window:
    """What this process did since the last block; thread-safe, emptied by take()."""

    stages: dict[str, list[float]] = field(default_factory=dict)
    batch_sizes: list[int] = field(default_factory=list)
    fills: list[float] = field(default_factory=list)
    segment_count: int = 0
    lookups: dict[str, list[int]] = field(default_factory=dict)
    """Per source (memory, cache, dedup): [hits, looked up]."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def stage(self, name: str, seconds: float) -> None:
        with self.lock:
            self.stages.setdefault(name, []).append(seconds)

    def batch(self, size: int, fill: float) -> None:
        with self.lock:
            self.batch_sizes.append(size)
            self.fills.append(fill)

    def segments(self, count: int) -> None:
        with self.lock:
            self.segment_count += count

    def lookup(self, source: str, hits: int, total: int) -> None:
        with self.lock:
            counts = self.lookups.setdefault(source, [0, 0])
            counts[0] += hits
            counts[1] += total

    def take(self) -> Window:
        """Return the collected values and start a new window."""
        with self.lock:
            taken = Window(self.stages, self.batch_sizes, self.fills, self.segment_count)
            taken.lookups = self.lookups
            self.stages, self.batch_sizes, self.fills = {}, [], []
            self.segment_count = 0
            self.lookups = {}
        return taken


WINDOW = Window()
"""The process-wide window that stapel.metrics feeds."""


@dataclass
class Cluster:
    """The cluster-wide view for one block, read from the DB and presence."""

    finished: int = 0
    succeeded: int = 0
    latencies: list[float] = field(default_factory=list)
    queued: dict[str, int] = field(default_factory=dict)
    models: dict[str, list[str]] = field(default_factory=dict)


def read_cluster(
    sessions: sessionmaker[Session], client: redis.Redis | None, since_s: float
) -> Cluster:
    """Read jobs finished in the last since_s seconds, queued chunks and loaded models."""
    cluster = Cluster()
    cutoff = utcnow() - timedelta(seconds=since_s)
    with sessions() as session:
        for status, created, finished in session.execute(
            select(Job.status, Job.created_at, Job.finished_at).where(Job.finished_at >= cutoff)
        ):
            cluster.finished += 1
            cluster.succeeded += status == Status.SUCCEEDED
            if finished is not None:
                cluster.latencies.append((finished - created).total_seconds())
        cluster.queued = dict(
            session.execute(
                select(Chunk.pool, func.count())
                .where(Chunk.status == Status.QUEUED)
                .group_by(Chunk.pool)
            ).all()
        )
    if client is not None:
        try:
            cluster.models = {
                name: list(r.get("models") or []) for name, r in read_all(client).items()
            }
        except (redis.RedisError, ValueError):
            cluster.models = {}
    return cluster


def format_block(process: str, interval_s: float, window: Window, cluster: Cluster) -> str:
    """Return one tracer block: a header line and indented key=value lines."""
    lines = [f"tracer process={process} interval_s={interval_s:g}"]
    for stage in ("queue_wait", "tokenize", "translate", "write"):
        values = window.stages.get(stage, [])
        lines.append(
            f"  stage={stage} count={len(values)} total_s={sum(values):.3f} "
            f"avg_ms={1000 * sum(values) / len(values) if values else 0:.1f} "
            f"p95_ms={1000 * percentile(values, 95):.1f}"
        )
    lines.append(
        f"  throughput jobs_per_s={cluster.finished / interval_s:.3f} "
        f"segments_per_s={window.segment_count / interval_s:.2f} "
        f"segments={window.segment_count}"
    )
    for source in ("memory", "cache", "dedup"):
        hits, total = window.lookups.get(source, [0, 0])
        lines.append(
            f"  lookup source={source} hits={hits} looked_up={total} "
            f"hit_ratio={hits / total if total else 0:.3f}"
        )
    ratio = cluster.succeeded / cluster.finished if cluster.finished else 1.0
    lines.append(
        f"  jobs finished={cluster.finished} succeeded={cluster.succeeded} "
        f"success_ratio={ratio:.3f}"
    )
    lines.append(
        "  latency_s "
        + " ".join(f"p{q}={percentile(cluster.latencies, q):.2f}" for q in (50, 90, 95, 99))
    )
    lines.append(
        "  queue_depth "
        + (" ".join(f"{pool}={n}" for pool, n in sorted(cluster.queued.items())) or "none")
    )
    sizes, fills = window.batch_sizes, window.fills
    lines.append(
        f"  batches count={len(sizes)} "
        f"avg_size={sum(sizes) / len(sizes) if sizes else 0:.1f} "
        f"max_size={max(sizes, default=0)} "
        f"fill_ratio={sum(fills) / len(fills) if fills else 0:.2f}"
    )
    for worker, models in sorted(cluster.models.items()):
        lines.append(f"  worker={worker} models={','.join(models) or '-'}")
    return "\n".join(lines)


class Tracer:
    """A daemon thread that writes a block to the tracer log every interval_s."""

    def __init__(
        self,
        process: str,
        sessions: sessionmaker[Session],
        client: redis.Redis | None,
        interval_s: float = DEFAULT_INTERVAL_S,
    ) -> None:
        self.process, self.sessions, self.redis = process, sessions, client
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tracer", daemon=True)

    def start(self) -> Tracer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def write_block(self) -> str:
        """Write one block now (and start a new window); return it."""
        cluster = read_cluster(self.sessions, self.redis, self.interval_s)
        block = format_block(self.process, self.interval_s, WINDOW.take(), cluster)
        logging.getLogger(TRACER_LOGGER).info(block)
        return block

    def _run(self) -> None:
        next_at = time.monotonic() + self.interval_s
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            next_at += self.interval_s
            try:
                self.write_block()
            except Exception:  # the tracer must never take a worker down
                log.exception("tracer block failed process=%s", self.process)
