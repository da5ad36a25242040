"""A worker process's runtime: its state built once, its segment budget, its start-up.

Readiness: a worker is ready once it publishes its presence record and no model under
its model root is broken (`python -m workers.runtime ready <hostname>`, the pods'
readiness probe); a broken model shows in its log and its presence record too.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import redis
from celery import Celery, signals
from sqlalchemy.orm import Session, sessionmaker

from stapel import metrics
from stapel.db import make_engine, make_session_factory
from stapel.exceptions import ModelUnavailable
from stapel.presence import Publisher, ServedQueues, model_queue, presence_key
from stapel.settings import Settings, current
from stapel.tracer import Tracer
from stapel.withdrawals import Listener
from workers import allocator
from workers.budget import Budget
from workers.committer import Committer
from workers.engine import Engine, pick_batch_limits, pick_device
from workers.takealong import TakeAlong, consume_pause_s, pace_consumer

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
    budget: Budget = field(init=False)
    """Segments of the chunks this worker's tasks are translating now, and the line."""
    committer: Committer = field(init=False)
    """Claims and finishes of this worker's chunks, a group per transaction."""
    takealong: TakeAlong = field(init=False)
    """The chunk messages its tasks take along from the queue (workers/takealong.py)."""
    hostname: str = ""
    """This worker's Celery name, set at start-up (its presence key)."""
    queues: tuple[str, ...] = ()
    """The queues it consumes at start-up: a worker not on its pool queue has no pool."""

    @property
    def consumes_pool(self) -> bool:
        """Whether this worker takes chunks from its pool's queue (the control worker not)."""
        return not self.queues or self.settings.pool in self.queues

    def __post_init__(self) -> None:
        self.budget = Budget(self.settings.worker_segments)
        self.committer = Committer(self.sessions, self.redis)
        self.takealong = TakeAlong(self.redis)

    def hold(self, segments: int, wait_s: float, priority: int = 0, task_id: str = "") -> bool:
        """Take segments into this worker's budget, in line; False: hand the chunk back.

        The first chunk always fits; past STAPEL_WORKER_SEGMENTS the task waits in line.
        The head of the line looks every wait_s (in the cached presence view) for another
        worker of the pool with room for its chunk and gives up only then, or when the
        worker is stopping: with every worker full it waits without publishing or writing.
        """
        ticket = self.budget.enter(segments, priority, task_id)
        while not self.budget.wait(ticket, wait_s):
            if self.budget.closed or self.served.take_elsewhere(
                self.settings.pool, self.hostname, segments
            ):
                self.budget.leave(ticket)
                return False
        return True

    def release(self, segments: int) -> None:
        """Give segments back to the budget and wake the tasks waiting for room."""
        self.budget.release(segments)

    def snapshot(self) -> dict:
        """Return this worker's presence record: pool, busy tasks, models, budget and line.

        `pool` is empty for a worker that does not consume its pool's queue (the control
        worker): it takes no chunks, so it offers no room and counts in no pool. `broken`
        lists the pairs it cannot load (it never takes their chunks); `fingerprints` the
        model fingerprint of each loaded pair (the web answers a job from the MT cache at
        submit only under the fingerprint every live worker of the pair agrees on).
        """
        pool = self.settings.pool if self.consumes_pool else ""
        waiting_segments, waiting = self.budget.waiting()
        return {
            "pool": pool,
            "busy": self.busy,
            "models": self.engine.loaded_pairs() if pool else [],
            "fingerprints": self.engine.loaded_fingerprints() if pool else {},
            "languages": self.engine.loaded_languages() if pool else {},
            "broken": self.engine.broken(),
            "budget": self.budget.limit if pool else 0,
            "held": self.budget.held,
            "waiting_segments": waiting_segments,
            "waiting": waiting,
        }


def build_engine(settings: Settings) -> Engine:
    """Return the translation engine the settings describe (models load on demand)."""
    device = pick_device(settings.device)
    tokens, memory = pick_batch_limits(device, settings.batch_tokens, settings.batch_memory_tokens)
    return Engine(
        settings.model_root,
        device=device,
        compute_type=settings.compute_type,
        threads=settings.threads,
        parallel_batches=settings.parallel_batches,
        max_loaded=settings.max_loaded_models,
        batch_tokens=tokens,
        batch_memory_tokens=memory,
        batch_wait_s=settings.batch_wait_ms / 1000,
        max_decoding_length=settings.max_decoding_length,
        min_decoding_length=settings.min_decoding_length,
        beam_size=settings.beam_size,
        max_input_tokens=settings.max_input_tokens,
        family_options={"argos": argos_options(settings)},
        pivot=settings.pivot,
    )


def argos_options(settings: Settings) -> dict:
    """Argos packages' decoding: their beam and length penalty, unknowns replaced by the
    source piece they attend to most (as Argos calls CTranslate2)."""
    return {
        "beam_size": settings.argos_beam_size or settings.beam_size,
        "length_penalty": settings.argos_length_penalty,
        "replace_unknowns": True,
    }


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


def _consumed(consumer) -> tuple[str, ...]:
    task_consumer = getattr(consumer, "task_consumer", None)
    return tuple(q.name for q in getattr(task_consumer, "queues", ()) or ())


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
        self.withdrawals: Listener | None = None

    def start(self, consumer) -> None:
        """Load STAPEL_PRELOAD pairs, join model queues as models load, start presence.

        Runs in the worker's main thread before it consumes: preloaded pairs join their
        queues through the consumer directly (a broadcast sent now would not be heard);
        pairs loaded later by tasks join through a control broadcast to this worker.
        """
        current_state = state()
        settings, engine = current_state.settings, current_state.engine
        current_state.hostname = self.hostname
        current_state.queues = _consumed(consumer)
        # Tasks waiting for room hand their chunks back at once when the worker stops.
        signals.worker_shutting_down.connect(lambda **_: current_state.budget.close(), weak=False)
        engine.check_root()
        allocator.tune(settings.malloc_tuning)  # before a model's buffers are allocated
        pace_consumer(
            consume_pause_s(settings.consume_pause_ms, settings.batch_wait_ms),
            current_state.takealong,
        )
        engine.on_load = _counting(
            lambda pair: consumer.add_task_queue(model_queue(settings.pool, pair))
        )
        engine.on_evict = self._leave_model_queue
        for pair in settings.preload:
            try:
                engine.model(pair)
            except ModelUnavailable as exc:
                log.error("preload failed pair=%s error=%s", pair, exc)
        engine.on_load = _counting(self._join_model_queue)
        self.publisher = Publisher(current_state.redis, self.hostname, current_state.snapshot)
        self.publisher.start()
        self.withdrawals = Listener(current_state.redis, engine.withdraw_job).start()
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
        if self.withdrawals is not None:
            self.withdrawals.stop()
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


def ready(client: redis.Redis, hostname: str) -> tuple[bool, str]:
    """Return (ready, why) for a worker: its presence record is there, no model broken."""
    raw = client.get(presence_key(hostname))
    if raw is None:
        return False, f"no presence record for {hostname}"
    broken = json.loads(raw).get("broken") or {}
    if broken:
        return False, "broken models: " + "; ".join(f"{p}: {r}" for p, r in sorted(broken.items()))
    return True, "ready"


def main(argv: list[str]) -> int:
    """`python -m workers.runtime ready HOSTNAME`: exit 0 when that worker is ready."""
    if len(argv) != 2 or argv[0] != "ready":
        print("usage: python -m workers.runtime ready HOSTNAME", file=sys.stderr)
        return 2
    try:
        client = redis.Redis.from_url(current().redis_url, socket_timeout=5)
        is_ready, why = ready(client, argv[1])
    except redis.RedisError as exc:
        is_ready, why = False, f"redis unreachable: {type(exc).__name__}"
    print(why)
    return 0 if is_ready else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
