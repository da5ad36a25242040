"""The control tasks' bodies: a watchdog pass, and one callback delivery."""

from __future__ import annotations

import logging

import redis
from celery import Celery

from stapel import callbacks, logs, metrics, netguard
from stapel.broker import send_callback, waiting_task_ids
from stapel.celery_config import POOL_QUEUES
from stapel.db import with_retry
from stapel.dispatch import dispatch
from stapel.interactive import purge as purge_compat
from stapel.presence import read_all, served_model_queues
from stapel.tables import utcnow
from stapel.watchdog import reconcile
from workers.runtime import state

log = logging.getLogger(__name__)


def run_watchdog(celery: Celery) -> str:
    """Run one watchdog pass and send what it found lost; return its summary line."""
    current = state()
    live: set[str] | None
    try:
        served = served_model_queues(read_all(current.redis))
        live = waiting_task_ids(current.redis, [*POOL_QUEUES, *sorted(served)])
    except redis.RedisError as exc:
        log.warning("watchdog cannot read the broker error=%s", exc)
        served, live = set(), None
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
        for action, count in (
            ("requeued", report.requeued),
            ("failed", report.failed),
            ("resent", len(report.to_send)),
        ):
            if count:
                metrics.WATCHDOG.labels(action).inc(count)
        if report.to_send:
            dispatch(session, celery, served, leased=report.to_send)
        purge_compat(session, settings.compat_keep_s)
    for job_id in report.callbacks:
        send_callback(celery, job_id)
    summary = report.summary()
    log.info(summary)
    return summary


def http_post(url: str, body: bytes, headers: dict) -> int:
    """POST a callback to its checked public IP: bounded time and answer, no redirects."""
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
    """Try to deliver a job's callback once; the watchdog schedules retries."""
    with state().sessions() as session, logs.job_context(job_id):
        outcome, _delay = with_retry(session, lambda: callbacks.deliver(session, job_id, http_post))
    return outcome
