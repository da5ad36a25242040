"""One chunk's trip through a worker: budget, claim, translate, write, finish or fail.

The steps run in order, each handing on to the next: `run_chunk` takes room in the
worker's budget (or hands the chunk back), claims it (or skips it), translates its
pending segments batch by batch with a heartbeat per batch, and finishes it; a failure
requeues or fails the chunk.
"""

from __future__ import annotations

import logging
import time

from celery import Celery
from sqlalchemy import select
from sqlalchemy.orm import Session

from stapel import callbacks, logs, metrics
from stapel.broker import send_callback
from stapel.chunks import (
    Claim,
    chunk_size,
    claim_chunk,
    fail_chunk,
    finish_chunk,
    pending_segments,
    record_batch,
)
from stapel.db import with_retry
from stapel.dispatch import dispatch
from stapel.exceptions import PermanentTranslationError
from stapel.interactive import announce_end
from stapel.states import ChunkOutcome, TaskOutcome
from stapel.tables import Chunk, utcnow
from workers.runtime import WorkerState, state

log = logging.getLogger(__name__)


def run_chunk(
    celery: Celery,
    chunk_id: str,
    worker: str,
    queue: str = "",
    segments: int | None = None,
    interactive: bool = False,
) -> str:
    """Claim, translate and finish one chunk; return what happened, for the task result.

    An interactive chunk (a caller waits on it) skips the worker's segment budget: it is
    a few segments the batcher serves first, and handing it back would only delay it.
    """
    current = state()
    with current.lock:
        current.busy += 1
    try:
        with current.sessions() as session:
            return _run_chunk(
                current, celery, session, chunk_id, worker, queue, 0 if interactive else segments
            )
    finally:
        with current.lock:
            current.busy -= 1


def _run_chunk(
    current: WorkerState,
    celery: Celery,
    session: Session,
    chunk_id: str,
    worker: str,
    queue: str,
    segments: int | None,
) -> str:
    if segments is None:
        segments = with_retry(session, lambda: chunk_size(session, chunk_id))
        session.commit()
    if segments and not current.hold(segments, current.settings.defer_s):
        return _hand_back(current, celery, session, chunk_id)
    try:
        claim = with_retry(session, lambda: claim_chunk(session, chunk_id, worker))
        if claim is None:
            return _skipped(session, chunk_id, worker)
        with logs.job_context(claim.job_id, claim.chunk_idx):
            outcome = _run_claimed(current, celery, session, claim, worker, queue)
        announce_end(current.redis, claim.job_id, outcome)
        metrics.CHUNKS.labels(current.settings.pool, outcome).inc()
        return outcome
    finally:
        current.release(segments)


def _skipped(session: Session, chunk_id: str, worker: str) -> str:
    job_id = with_retry(
        session, lambda: session.scalar(select(Chunk.job_id).where(Chunk.id == chunk_id))
    )
    log.info(
        "chunk not claimable, skipping logid=%s chunk_id=%s worker=%s",
        job_id or "-",
        chunk_id,
        worker,
    )
    return TaskOutcome.SKIPPED


def _hand_back(current: WorkerState, celery: Celery, session: Session, chunk_id: str) -> str:
    """Send a chunk this worker has no room for back to the broker, for any worker.

    It goes to the back of its priority (a new message, through the one dispatch); the
    task id is recorded so the watchdog sees the chunk as waiting, not lost.
    """
    sent = with_retry(
        session, lambda: dispatch(session, celery, current.served.get(), chunk_ids=[chunk_id])
    )
    if not sent:  # claimed or ended meanwhile (or the broker is down: the watchdog)
        return TaskOutcome.SKIPPED
    log.info("chunk deferred: worker full logid=%s chunk_id=%s", sent[0].job_id, chunk_id)
    return TaskOutcome.DEFERRED


def _run_claimed(
    current: WorkerState, celery: Celery, session: Session, claim: Claim, worker: str, queue: str
) -> str:
    if claim.sent_at is not None:
        metrics.observe_stage("queue_wait", max(0.0, (utcnow() - claim.sent_at).total_seconds()))
    log.info(
        "chunk claimed logid=%s chunk=%d attempt=%d worker=%s queue=%s",
        claim.job_id,
        claim.chunk_idx,
        claim.attempt,
        worker,
        queue,
    )
    try:
        return _translate(current, celery, session, claim)
    except PermanentTranslationError as exc:
        return _fail(current, celery, session, claim, str(exc), retry=False)
    except (RuntimeError, ValueError) as exc:
        log.exception("chunk translation error logid=%s chunk=%d", claim.job_id, claim.chunk_idx)
        return _fail(current, celery, session, claim, f"{type(exc).__name__}: {exc}", retry=True)


def _translate(current: WorkerState, celery: Celery, session: Session, claim: Claim) -> str:
    pending = with_retry(session, lambda: pending_segments(session, claim))
    # End the read transaction: a task waiting in the batcher must not hold a pooled
    # connection (64 waiting tasks would drain the pool and stall every other claim).
    session.commit()
    started = time.monotonic()
    settings = current.settings
    cached = claim.pair in current.engine.loaded_pairs()
    metrics.MODEL_CACHE.labels(claim.pair, "hit" if cached else "miss").inc()
    batches = current.engine.translate_batches(
        claim.pair,
        pending,
        priority=claim.priority,
        job_id=claim.job_id,
        tick_s=settings.heartbeat_s,
    )
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
        owned = with_retry(session, lambda part=part: record_batch(session, claim, part))
        metrics.observe_stage("write", time.monotonic() - write_started)
        if not owned:
            return _stopped(claim)
    write_started = time.monotonic()
    outcome = with_retry(session, lambda: finish_chunk(session, claim, last))
    metrics.observe_stage("write", time.monotonic() - write_started)
    if outcome == ChunkOutcome.LOST:
        return _stopped(claim)
    if outcome == ChunkOutcome.JOB_SUCCEEDED and claim.has_callback:
        send_callback(celery, claim.job_id)
    log.info(
        "chunk done logid=%s chunk=%d segments=%d seconds=%.2f job=%s",
        claim.job_id,
        claim.chunk_idx,
        len(pending),
        time.monotonic() - started,
        "succeeded" if outcome == ChunkOutcome.JOB_SUCCEEDED else "running",
    )
    return outcome


def _stopped(claim: Claim) -> str:
    log.info(
        "chunk stopped: cancelled or requeued logid=%s chunk=%d", claim.job_id, claim.chunk_idx
    )
    return TaskOutcome.STOPPED


def _fail(
    current: WorkerState, celery: Celery, session: Session, claim: Claim, error: str, *, retry: bool
) -> str:
    outcome = with_retry(
        session,
        lambda: fail_chunk(
            session, claim, error, retry=retry, max_attempts=current.settings.max_attempts
        ),
    )
    log.warning(
        "chunk %s logid=%s chunk=%d error=%s", outcome, claim.job_id, claim.chunk_idx, error
    )
    if outcome == ChunkOutcome.REQUEUED:
        dispatch(session, celery, current.served.get(), job_id=claim.job_id, only_unsent=True)
    elif outcome == ChunkOutcome.JOB_FAILED and callbacks.is_pending(session, claim.job_id):
        send_callback(celery, claim.job_id)
    return outcome
