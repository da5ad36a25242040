"""The control tasks' bodies: a watchdog pass, and one callback delivery."""

from __future__ import annotations

import base64
import json
import logging

import redis
from celery import Celery
from sqlalchemy.orm import Session

from stapel import callbacks, liveness, logs, metrics, mtcache, netguard
from stapel.broker import PRIORITY_SEP, send_callback
from stapel.celery_config import CALLBACK_QUEUE, POOL_QUEUES
from stapel.dispatch import dispatch
from stapel.interactive import purge as purge_compat
from stapel.presence import Room, model_room, read_all, served_model_queues
from stapel.unserved import unserved_chunks
from stapel.watchdog import reconcile
from workers.runtime import state

log = logging.getLogger(__name__)

TURN_KEY = "stapel:watchdog:turn"
"""Redis key a pass takes for half a period: messages that piled up while no control
worker ran, or two control workers, make one pass, not many. (Celery's `expires` would
compare beat's clock with the worker's.)"""


def take_turn(client: redis.Redis, interval_s: float) -> bool:
    """Return whether this pass may run (no other started within half a period)."""
    try:
        return bool(client.set(TURN_KEY, "1", nx=True, px=max(100, int(interval_s * 500))))
    except redis.RedisError:
        return True  # passes are compare-and-sets: running one too many is harmless


def waiting_callbacks(client: redis.Redis) -> set[str]:
    """Return the job ids whose delivery task waits in the callbacks queue."""
    jobs: set[str] = set()
    keys = [CALLBACK_QUEUE if p == 0 else f"{CALLBACK_QUEUE}{PRIORITY_SEP}{p}" for p in range(10)]
    for key in keys:
        for raw in client.lrange(key, 0, -1):
            try:
                args = json.loads(base64.b64decode(json.loads(raw)["body"]))[0]
                jobs.add(str(args[0]))
            except (ValueError, KeyError, IndexError, TypeError):
                continue
    return jobs


def warn_unserved(session: Session, records: dict[str, dict]) -> dict[str, int]:
    """Say (a warning, so in the .wf file) which pools hold queued work nobody consumes."""
    unserved = unserved_chunks(session, records)
    session.commit()
    for pool, count in sorted(unserved.items()):
        log.warning("queued work has no live consumer pool=%s chunks=%d", pool, count)
    return unserved


def run_watchdog(celery: Celery) -> str:
    """Run one watchdog pass and send what it found lost; return its summary line."""
    current = state()
    settings = current.settings
    if not take_turn(current.redis, settings.watchdog_interval_s):
        log.info("watchdog pass skipped: another started less than half a period ago")
        return "skipped"
    live: set[str] | None
    queued: set[str] | None
    records: dict[str, dict] | None = None
    try:
        records = read_all(current.redis)
        room = model_room(records)
        queues = [*POOL_QUEUES, *sorted(served_model_queues(records))]
        live = liveness.live_task_ids(
            current.redis, current.sessions, queues, records, settings.requeue_grace_s
        )
        queued = waiting_callbacks(current.redis)
    except redis.RedisError as exc:
        log.warning("watchdog cannot read the broker error=%s", exc)
        room, live, queued = Room(), None, None
    with current.sessions() as session:
        report = reconcile(
            session,
            heartbeat_timeout_s=settings.heartbeat_timeout_s,
            max_attempts=settings.max_attempts,
            grace_s=settings.requeue_grace_s,
            live_task_ids=live,
            waiting_callbacks=queued,
            tenant_cap=settings.callback_tenant_in_flight,
        )
        for action, count in (
            ("requeued", report.requeued),
            ("failed", report.failed),
            ("resent", len(report.to_send)),
            ("ended", report.ended),
        ):
            if count:
                metrics.WATCHDOG.labels(action).inc(count)
        if report.to_send:
            dispatch(session, celery, room, leased=report.to_send)
        if records is not None:
            warn_unserved(session, records)
        purge_compat(session, settings.compat_keep_s)
        # what expired since the last pass (ix_mt_cache_created): a few rows each time
        mtcache.purge_expired(session, settings.cache_ttl_s)
    for job_id in report.callbacks:
        send_callback(celery, job_id)
    summary = report.summary()
    log.info(summary)
    return summary


def http_post(url: str, body: bytes, headers: dict) -> int:
    """POST a callback to its checked public IP: one hard deadline, bounded answer."""
    settings = state().settings
    return netguard.post(
        url,
        body,
        headers,
        allow_hosts=settings.callback_allow_hosts,
        timeout_s=settings.callback_timeout_s,
        max_response_bytes=settings.callback_max_response_bytes,
    )


def run_callback(job_id: str) -> str:
    """Try to deliver a job's callback once; the watchdog schedules retries.

    Not wrapped in a DB retry as a whole: `callbacks.deliver` retries its own database
    steps, so a database error after the POST never sends it again.
    """
    settings = state().settings
    with state().sessions() as session, logs.job_context(job_id):
        outcome, _delay = callbacks.deliver(
            session,
            job_id,
            http_post,
            hold_s=callbacks.lease_s(settings.callback_timeout_s),
            tenant_cap=settings.callback_tenant_in_flight,
        )
    return outcome
