"""What a worker process does for a task, with its process-wide state built once."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

import redis
from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session, sessionmaker

from app import callbacks, logs, metrics, netguard
from app.broker import (
    model_queue,
    send_callback,
    send_chunk,
    served_model_queues,
    waiting_task_ids,
)
from app.chunks import (
    Claim,
    chunk_size,
    claim_chunk,
    fail_chunk,
    finish_chunk,
    pending_segments,
    record_batch,
)
from app.config import Settings
from app.db import make_engine, make_session_factory
from app.exceptions import PermanentTranslationError
from app.jobs import chunk_messages, mark_sent
from app.models import Chunk, new_id, utcnow
from app.presence import Publisher, read_all
from app.tracer import Tracer
from app.watchdog import reconcile
from workers.celery_app import celery
from workers.engine import Engine

log = logging.getLogger(__name__)
T = TypeVar("T")

DB_RETRY_DELAYS = (0.5, 1, 2, 4, 8)
"""Backoff between tries of a DB call that failed on a lost connection."""


@dataclass
class WorkerState:
    """What a worker process keeps for its whole life."""

    settings: Settings
    sessions: sessionmaker[Session]
    engine: Engine
    redis: redis.Redis
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
                lambda: not self.held or self.held + segments <= budget, timeout=wait_s)
            if fits:
                self.held += segments
            return fits

    def release(self, segments: int) -> None:
        with self.room:
            self.held -= segments
            self.room.notify_all()

    def snapshot(self) -> dict:
        """Return this worker's presence record: pool, busy tasks, loaded models."""
        return {"pool": self.settings.pool, "busy": self.busy,
                "models": self.engine.loaded_pairs()}


@functools.cache
def state() -> WorkerState:
    """Build the process's settings, DB sessions, engine and Redis client once."""
    settings = Settings.from_env()
    return WorkerState(
        settings=settings,
        sessions=make_session_factory(make_engine(settings.database_url)),
        engine=Engine(
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
        ),
        redis=redis.Redis.from_url(settings.redis_url, socket_timeout=10),
    )


def _join_model_queue(hostname: str, pair: str) -> None:
    queue = model_queue(state().settings.pool, pair)
    celery.control.add_consumer(queue, destination=[hostname], reply=False)
    log.info("joined model queue queue=%s worker=%s", queue, hostname)


def _leave_model_queue(hostname: str, pair: str) -> None:
    queue = model_queue(state().settings.pool, pair)
    celery.control.cancel_consumer(queue, destination=[hostname], reply=False)
    log.info("left model queue queue=%s worker=%s", queue, hostname)


def _counting(on_load: Callable[[str], None]) -> Callable[[str], None]:
    def loaded(pair: str) -> None:
        metrics.MODEL_LOADS.labels(pair).inc()
        on_load(pair)
    return loaded


def start_observability(hostname: str) -> Tracer | None:
    """Serve metrics on STAPEL_METRICS_PORT and write tracer blocks when logging to files."""
    current = state()
    if current.settings.metrics_port:
        metrics.start_exporter(current.settings.metrics_port)
    if logs.log_dir() is None:
        return None
    return Tracer(hostname, current.sessions, current.redis,
                  current.settings.tracer_s).start()


def start(hostname: str, consumer) -> Publisher:
    """Start presence, load STAPEL_PRELOAD pairs, join model queues as models load.

    Runs in the worker's main thread before it consumes: preloaded pairs join their
    queues through the consumer directly (a broadcast sent now would not be heard);
    pairs loaded later by tasks join through a control broadcast to this worker.
    """
    current = state()
    pool = current.settings.pool
    current.engine.on_load = _counting(
        lambda pair: consumer.add_task_queue(model_queue(pool, pair)))
    current.engine.on_evict = functools.partial(_leave_model_queue, hostname)
    for pair in current.settings.preload:
        try:
            current.engine.model(pair)
        except PermanentTranslationError as exc:
            log.error("preload failed pair=%s error=%s", pair, exc)
    current.engine.on_load = _counting(functools.partial(_join_model_queue, hostname))
    publisher = Publisher(current.redis, hostname, current.snapshot)
    publisher.start()
    return publisher


def with_db_retry(session: Session, call: Callable[[], T]) -> T:
    """Run a DB call, retrying with backoff while the database is unreachable."""
    for delay in DB_RETRY_DELAYS:
        try:
            return call()
        except (OperationalError, PoolTimeout) as exc:
            session.rollback()
            log.warning("database unavailable, retrying in %ss error=%s", delay,
                        getattr(exc, "orig", exc))
            time.sleep(delay)
    return call()


def run_chunk(chunk_id: str, worker: str, queue: str = "", segments: int | None = None) -> str:
    """Claim, translate and finish one chunk; return what happened, for the task result."""
    current = state()
    with current.lock:
        current.busy += 1
    try:
        return _run_chunk(current, chunk_id, worker, queue, segments)
    finally:
        with current.lock:
            current.busy -= 1


def _run_chunk(current: WorkerState, chunk_id: str, worker: str, queue: str,
               segments: int | None) -> str:
    with current.sessions() as session:
        if segments is None:
            segments = with_db_retry(session, lambda: chunk_size(session, chunk_id))
            session.commit()
        if not current.hold(segments, current.settings.defer_s):
            return _defer(session, chunk_id, queue)
        try:
            return _claim_and_run(current, session, chunk_id, worker, queue)
        finally:
            current.release(segments)


def _skipped(session: Session, chunk_id: str, worker: str) -> str:
    job_id = with_db_retry(session, lambda: session.scalar(
        select(Chunk.job_id).where(Chunk.id == chunk_id)))
    log.info("chunk not claimable, skipping logid=%s chunk_id=%s worker=%s",
             job_id or "-", chunk_id, worker)
    return "skipped"


def _defer(session: Session, chunk_id: str, queue: str) -> str:
    """Send a chunk this worker has no room for back to its queue, for any worker.

    It goes to the back of its priority (a new message); the task id is recorded so
    the watchdog sees the chunk as waiting, not lost.
    """
    found = with_db_retry(session, lambda: chunk_messages(session, None, chunk_id=chunk_id))
    if not found:  # claimed or ended meanwhile
        return "skipped"
    message, job_id = found[0], found[0].job_id
    task_id = new_id()
    if send_chunk(celery, replace(message, queue=queue or None), task_id):
        with_db_retry(session, lambda: mark_sent(session, {chunk_id: task_id}))
    log.info("chunk deferred: worker full logid=%s chunk_id=%s", job_id, chunk_id)
    return "deferred"


def _claim_and_run(current: WorkerState, session: Session, chunk_id: str, worker: str,
                   queue: str) -> str:
    claim = with_db_retry(session, lambda: claim_chunk(session, chunk_id, worker))
    if claim is None:
        return _skipped(session, chunk_id, worker)
    with logs.job_context(claim.job_id, claim.chunk_idx):
        outcome = _run_claimed(current, session, claim, worker, queue)
    metrics.CHUNKS.labels(current.settings.pool, outcome).inc()
    return outcome


def _run_claimed(current: WorkerState, session: Session, claim: Claim, worker: str,
                 queue: str) -> str:
    if claim.sent_at is not None:
        metrics.observe_stage("queue_wait",
                              max(0.0, (utcnow() - claim.sent_at).total_seconds()))
    log.info(
        "chunk claimed logid=%s chunk=%d attempt=%d worker=%s queue=%s",
        claim.job_id, claim.chunk_idx, claim.attempt, worker, queue,
    )
    try:
        return _translate(current, session, claim)
    except PermanentTranslationError as exc:
        return _fail(current, session, claim, str(exc), retry=False)
    except (RuntimeError, ValueError) as exc:
        log.exception("chunk translation error logid=%s chunk=%d",
                      claim.job_id, claim.chunk_idx)
        return _fail(current, session, claim, f"{type(exc).__name__}: {exc}", retry=True)


def _translate(current: WorkerState, session: Session, claim: Claim) -> str:
    pending = with_db_retry(session, lambda: pending_segments(session, claim))
    # End the read transaction: a task waiting in the batcher must not hold a pooled
    # connection (64 waiting tasks would drain the pool and stall every other claim).
    session.commit()
    started = time.monotonic()
    settings = current.settings
    cached = claim.pair in current.engine.loaded_pairs()
    metrics.MODEL_CACHE.labels(claim.pair, "hit" if cached else "miss").inc()
    batches = current.engine.translate_batches(claim.pair, pending, priority=claim.priority,
                                               job_id=claim.job_id, tick_s=settings.heartbeat_s)
    left, last = len(pending), []
    for part in batches:
        # A quiet tick heartbeats only while the model's batcher is getting through
        # work: a hung translation must stop the heartbeats so the watchdog acts.
        if not part and not batches.batcher.progressing(settings.heartbeat_timeout_s / 2):
            continue
        left -= len(part)
        if part:
            metrics.observe_segments(settings.pool, claim.pair, len(part))
        if left == 0:
            last = part  # written with the chunk's finish, in one transaction
            break
        write_started = time.monotonic()
        owned = with_db_retry(session, lambda part=part: record_batch(session, claim, part))
        metrics.observe_stage("write", time.monotonic() - write_started)
        if not owned:
            return _stopped(claim)
    write_started = time.monotonic()
    outcome = with_db_retry(session, lambda: finish_chunk(session, claim, last))
    metrics.observe_stage("write", time.monotonic() - write_started)
    if outcome == "lost":
        return _stopped(claim)
    if outcome and claim.has_callback:
        send_callback(celery, claim.job_id)
    log.info(
        "chunk done logid=%s chunk=%d segments=%d seconds=%.2f job=%s",
        claim.job_id, claim.chunk_idx, len(pending), time.monotonic() - started,
        outcome or "running",
    )
    return outcome or "chunk_succeeded"


def _stopped(claim: Claim) -> str:
    log.info("chunk stopped: cancelled or requeued logid=%s chunk=%d",
             claim.job_id, claim.chunk_idx)
    return "stopped"


def _fail(current: WorkerState, session: Session, claim: Claim, error: str, *, retry: bool) -> str:
    outcome = with_db_retry(
        session,
        lambda: fail_chunk(session, claim, error, retry=retry,
                           max_attempts=current.settings.max_attempts),
    )
    log.warning("chunk %s logid=%s chunk=%d error=%s", outcome, claim.job_id,
                claim.chunk_idx, error)
    if outcome == "requeued":
        _send_queued(current, session, claim.job_id)
    elif outcome == "failed":
        _notify(session, claim.job_id)
    return outcome


def _notify(session: Session, job_id: str) -> None:
    """Send the callback task of a job that just ended, if it has a callback."""
    if callbacks.is_pending(session, job_id):
        send_callback(celery, job_id)


def _send_queued(current: WorkerState, session: Session, job_id: str) -> None:
    sent = {}
    for message in chunk_messages(session, job_id, only_unsent=True):
        task_id = new_id()
        if send_chunk(celery, message, task_id):
            sent[message.chunk_id] = task_id
    mark_sent(session, sent)


def run_watchdog() -> str:
    """Run one watchdog pass and send what it found lost; return its summary line."""
    current = state()
    try:
        served = sorted(served_model_queues(read_all(current.redis)))
        live: set[str] | None = waiting_task_ids(current.redis, ["cpu", "gpu", *served])
    except redis.RedisError as exc:
        log.warning("watchdog cannot read the broker error=%s", exc)
        live = None
    settings = current.settings
    with current.sessions() as session:
        report = reconcile(
            session,
            now=utcnow(),
            heartbeat_timeout_s=settings.heartbeat_timeout_s,
            max_attempts=settings.max_attempts,
            grace_s=settings.requeue_grace_s,
            live_task_ids=live,
        )
    for action, count in (("requeued", report.requeued), ("failed", report.failed),
                          ("resent", len(report.to_send))):
        if count:
            metrics.WATCHDOG.labels(action).inc(count)
    for message, task_id in report.to_send:
        send_chunk(celery, message, task_id)
    for job_id in report.callbacks:
        send_callback(celery, job_id)
    summary = report.summary()
    log.info(summary)
    return summary


def http_post(url: str, body: bytes, headers: dict) -> int:
    """POST a callback to its checked public IP: bounded time and answer, no redirects."""
    settings = state().settings
    return netguard.post(url, body, headers, allow_hosts=settings.callback_allow_hosts,
                         timeout_s=settings.callback_timeout_s,
                         max_response_bytes=settings.callback_max_response_bytes)


def run_callback(job_id: str) -> str:
    """Try to deliver a job's callback once; the watchdog schedules retries."""
    with state().sessions() as session, logs.job_context(job_id):
        outcome, _delay = with_db_retry(session, lambda: callbacks.deliver(session, job_id,
                                                                            http_post))
    return outcome
