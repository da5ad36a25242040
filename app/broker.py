"""Sending chunk tasks by name, and reading which task messages the broker still holds."""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import redis
from celery import Celery
from kombu.exceptions import OperationalError

from app.callbacks import CALLBACK_TASK
from app.jobs import ChunkMessage
from app.models import new_id

log = logging.getLogger(__name__)

TRANSLATE_TASK = "stapel.translate_chunk"
"""The stable name of the task that translates one chunk."""

PRIORITY_SEP = ":"


def make_celery(broker_url: str) -> Celery:
    """Return a Celery app configured from celeryconfig, used only to send tasks."""
    celery = Celery("stapel")
    celery.config_from_object("celeryconfig")
    celery.conf.broker_url = broker_url
    return celery


def broker_priority(priority: int) -> int:
    """Map the API's priority (9 most urgent) to Redis's (0 served first)."""
    return 9 - priority


def send_chunk(celery: Celery, message: ChunkMessage, task_id: str) -> bool:
    """Send one chunk's task under task_id; False (and a log line) if the broker is down."""
    try:
        celery.send_task(
            TRANSLATE_TASK,
            args=[message.chunk_id],
            kwargs={} if message.segments is None else {"segments": message.segments},
            queue=message.queue or message.pool,
            priority=broker_priority(message.priority),
            task_id=task_id,
        )
    except (OperationalError, redis.RedisError, OSError) as exc:
        log.warning(
            "send failed logid=%s chunk_id=%s error=%s; the watchdog will resend",
            message.job_id, message.chunk_id, type(exc).__name__,
        )
        return False
    return True


def send_chunks(celery: Celery, messages: list[ChunkMessage]) -> dict[str, str]:
    """Send one task per chunk, stopping at the first broker failure.

    Returns chunk id -> task id of those sent; the watchdog sends the rest later.
    """
    sent: dict[str, str] = {}
    for message in messages:
        task_id = new_id()
        if not send_chunk(celery, message, task_id):
            break
        sent[message.chunk_id] = task_id
    return sent


def send_callback(celery: Celery, job_id: str) -> bool:
    """Queue the delivery of a job's callback; False (logged) if the broker is down."""
    try:
        celery.send_task(CALLBACK_TASK, args=[job_id], queue="control")
    except (OperationalError, redis.RedisError, OSError) as exc:
        log.warning("callback send failed logid=%s error=%s; the watchdog will resend",
                    job_id, type(exc).__name__)
        return False
    return True


def model_queue(pool: str, pair: str) -> str:
    """Return the queue of a pool's workers that have pair loaded (`cpu.en-de`)."""
    return f"{pool}.{pair}"


def served_model_queues(records: dict[str, dict]) -> set[str]:
    """Return the model queues some live worker consumes, from presence records."""
    return {model_queue(r.get("pool", ""), pair) for r in records.values()
            for pair in r.get("models", [])}


def route_to_loaded(messages: list[ChunkMessage], pair: str, served: set[str]
                    ) -> list[ChunkMessage]:
    """Send chunks to the model queue when a worker of their pool has pair loaded.

    A cold pool keeps the shared queue, where any worker takes the task and loads the
    model on demand.
    """
    return [replace(m, queue=model_queue(m.pool, pair))
            if model_queue(m.pool, pair) in served else m for m in messages]


def waiting_task_ids(client: redis.Redis, queues: list[str]) -> set[str]:
    """Return the ids of task messages still waiting in the queues (all priorities).

    Messages already delivered (Redis's `unacked` hash) do not count: a chunk that stays
    `queued` past the grace period after its message was delivered lost its worker
    between delivery and claim, and sending it again is safe (the claim is a
    compare-and-set), while waiting for the visibility timeout would take hours.
    """
    ids: set[str] = set()
    keys = [q if p == 0 else f"{q}{PRIORITY_SEP}{p}" for q in queues for p in range(10)]
    for key in keys:
        for raw in client.lrange(key, 0, -1):
            ids.add(_task_id(json.loads(raw)))
    ids.discard("")
    return ids


def _task_id(message: dict) -> str:
    return str(message.get("headers", {}).get("id", ""))
