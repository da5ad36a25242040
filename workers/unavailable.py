"""A chunk whose model does not load on this worker: that worker's problem, not the job's.

The claim is given back at once, as if never taken (no attempt charged), and the chunk
is sent again through the one dispatch, for a worker that can load the model, once the
chunks it was taken with have ended; this worker does
not join the pair's model queue, and its presence record lists the pair as broken.
When every live worker of the pool reports the pair broken, no worker will ever take
the chunk, so its job fails at once with a clear error instead of after timeouts.
"""

from __future__ import annotations

import logging
import time

import redis
from celery import Celery
from sqlalchemy.orm import Session

from stapel import callbacks
from stapel.broker import send_callback
from stapel.chunks import Claim, fail_job, release_claim
from stapel.db import with_retry
from stapel.dispatch import dispatch
from stapel.exceptions import ModelUnavailable
from stapel.presence import model_queue, read_all
from stapel.states import ChunkOutcome, TaskOutcome
from workers.runtime import WorkerState

log = logging.getLogger(__name__)


def model_unavailable(
    current: WorkerState,
    celery: Celery,
    session: Session,
    claim: Claim,
    exc: ModelUnavailable,
    worker: str,
) -> str:
    """Give the chunk's claim back at once (its unit's other chunks keep going), or fail
    its job when no worker can load the model; send_back sends it again afterwards."""
    pool = current.settings.pool
    if not with_retry(session, lambda: release_claim(session, claim)):
        return TaskOutcome.STOPPED
    if broken_everywhere(current.redis, pool, exc.pair, worker):
        # The reason (paths, library errors) stays in the operators' log, not the job.
        log.error(
            "model broken on every worker pair=%s pool=%s reason=%s", exc.pair, pool, exc.reason
        )
        reason = (
            f"no worker of pool {pool} can load the model for {exc.pair}: it is missing or "
            "broken on every worker (the workers' logs say why)"
        )
        failed = with_retry(session, lambda: fail_job(session, claim.job_id, reason))
        if failed and callbacks.is_pending(session, claim.job_id):
            send_callback(celery, claim.job_id)
        return ChunkOutcome.JOB_FAILED
    return TaskOutcome.UNAVAILABLE


def send_back(
    current: WorkerState,
    celery: Celery,
    session: Session,
    given_back: list[tuple[Claim, ModelUnavailable]],
    worker: str,
) -> None:
    """Send chunks given back (model_unavailable) again, for a worker that can load
    their models, once the unit they came in has ended.

    They go back to the pool's queue, which this worker consumes too: one pause for all
    of them keeps a lone broken worker from bouncing them as fast as it can, and no
    claim of the unit waits through it without a heartbeat.
    """
    if not given_back:
        return
    pool = current.settings.pool
    served = current.served.get()
    if any(model_queue(pool, exc.pair) not in served for _, exc in given_back):
        time.sleep(current.settings.defer_s)
    try:
        dispatch(session, celery, served, chunk_ids=[claim.chunk_id for claim, _ in given_back])
    except Exception:  # queued and unsent: the watchdog sends them
        session.rollback()
        log.exception("chunks given back not sent count=%d", len(given_back))
        return
    for claim, exc in given_back:
        log.warning(
            "chunk handed back: model unavailable here logid=%s chunk=%d pair=%s worker=%s "
            "reason=%s",
            claim.job_id,
            claim.chunk_idx,
            exc.pair,
            worker,
            exc.reason,
        )


def broken_everywhere(client: redis.Redis, pool: str, pair: str, me: str) -> bool:
    """Return whether every other live worker taking pool's chunks lists pair as broken.

    Workers that do not consume the pool's queue (the control worker) do not count.
    When presence cannot be read, assume a healthy worker exists: handing back is safe,
    failing a job is not.
    """
    try:
        records = read_all(client)
    except redis.RedisError:
        return False
    others = [
        r
        for name, r in records.items()
        if name != me and r.get("pool") == pool  # a worker off its pool queue has no pool
    ]
    return all(pair in (r.get("broken") or {}) for r in others)
