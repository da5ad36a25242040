"""A worker process's runtime: its state built once, its segment budget, its start-up."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import redis
from celery import Celery
from sqlalchemy.orm import Session, sessionmaker

from stapel import metrics
from stapel.db import make_engine, make_session_factory
from stapel.exceptions import PermanentTranslationError
from stapel.presence import Publisher, ServedQueues, model_queue
from stapel.settings import Settings, current
from stapel.tracer import Tracer
from workers.engine import Engine

log = logging.getLogger(__name__)


@dataclass
class WorkerState:
    """What a worker process keeps for its whole life."""

    settings: Settings
    sessions: sessionmaker[Session]
    engine: Engine
    redis: redis.Redis
    served: ServedQueues
    busy: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    held: int = 0
    """Segments of the chunks this worker's tasks are translating now."""
    room: threading.Condition = field(default_factory=threading.Condition)

    def hold(self, segments: int, wait_s: float) -> bool:
        """Take segments into this worker's budget, waiting up to wait_s for room.

        The first chunk always fits; past STAPEL_WORKER_SEGMENTS the task waits, then
        gives up (its chunk goes back to the queue, for any worker).
        """
        budget = self.settings.worker_segments
        with self.room:
            fits = self.room.wait_for(
                lambda: not self.held or self.held + segments <= budget, timeout=wait_s
            )
            if fits:
                self.held += segments
            return fits

    def release(self, segments: int) -> None:
        """Give segments back to the budget and wake the tasks waiting for room."""
        with self.room:
            self.held -= segments
            self.room.notify_all()

    def snapshot(self) -> dict:
        """Return this worker's presence record: pool, busy tasks, loaded models."""
        return {"pool": self.settings.pool, "busy": self.busy, "models": self.engine.loaded_pairs()}


def build_engine(settings: Settings) -> Engine:
    """Return the translation engine the settings describe (models load on demand)."""
    return Engine(
        settings.model_root,
        device=settings.device,
        compute_type=settings.compute_type,
        threads=settings.threads,
        parallel_batches=settings.parallel_batches,
        max_loaded=settings.max_loaded_models,
        batch_tokens=settings.batch_tokens,
        batch_wait_s=settings.batch_wait_ms / 1000,
        max_decoding_length=settings.max_decoding_length,
        min_decoding_length=settings.min_decoding_length,
        beam_size=settings.beam_size,
    )


@functools.cache
def state() -> WorkerState:
    """Build the process's DB sessions, engine and Redis client once, from its settings."""
    settings = current()
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=10)
    return WorkerState(
        settings=settings,
        sessions=make_session_factory(make_engine(settings.database_url)),
        engine=build_engine(settings),
        redis=client,
        served=ServedQueues(client),
    )


def _counting(on_load: Callable[[str], None]) -> Callable[[str], None]:
    def loaded(pair: str) -> None:
        metrics.MODEL_LOADS.labels(pair).inc()
        on_load(pair)

    return loaded


class Runtime:
    """What a started worker runs beside its tasks: presence, tracer, model queues."""

    def __init__(self, celery: Celery, hostname: str) -> None:
        self.celery, self.hostname = celery, hostname
        self.publisher: Publisher | None = None
        self.tracer: Tracer | None = None

    def start(self, consumer) -> None:
        """Load STAPEL_PRELOAD pairs, join model queues as models load, start presence.

        Runs in the worker's main thread before it consumes: preloaded pairs join their
        queues through the consumer directly (a broadcast sent now would not be heard);
        pairs loaded later by tasks join through a control broadcast to this worker.
        """
        current_state = state()
        settings, engine = current_state.settings, current_state.engine
        engine.on_load = _counting(
            lambda pair: consumer.add_task_queue(model_queue(settings.pool, pair))
        )
        engine.on_evict = self._leave_model_queue
        for pair in settings.preload:
            try:
                engine.model(pair)
            except PermanentTranslationError as exc:
                log.error("preload failed pair=%s error=%s", pair, exc)
        engine.on_load = _counting(self._join_model_queue)
        self.publisher = Publisher(current_state.redis, self.hostname, current_state.snapshot)
        self.publisher.start()
        if settings.metrics_port:
            metrics.start_exporter(settings.metrics_port)
        if settings.log_dir is not None:
            self.tracer = Tracer(
                self.hostname, current_state.sessions, current_state.redis, settings.tracer_s
            ).start()

    def stop(self) -> None:
        """Stop the tracer and withdraw this worker's presence record."""
        if self.tracer is not None:
            self.tracer.stop()
        if self.publisher is not None:
            self.publisher.stop()

    def _join_model_queue(self, pair: str) -> None:
        queue = model_queue(state().settings.pool, pair)
        self.celery.control.add_consumer(queue, destination=[self.hostname], reply=False)
        log.info("joined model queue queue=%s worker=%s", queue, self.hostname)

    def _leave_model_queue(self, pair: str) -> None:
        queue = model_queue(state().settings.pool, pair)
        self.celery.control.cancel_consumer(queue, destination=[self.hostname], reply=False)
        log.info("left model queue queue=%s worker=%s", queue, self.hostname)
