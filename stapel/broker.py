"""The broker's side of a send: a task message built as Celery would and pushed onto Redis.

`send_chunk` carries out one chunk's send, given its queue and priority; which chunks go,
to which queue and at which priority is stapel.dispatch's decision. Also here: the map
from the API's priorities to Redis's, and reading which task messages Redis still holds
(for the watchdog).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import uuid
import weakref
from dataclasses import dataclass

import redis
from celery import Celery
from kombu.exceptions import OperationalError

from stapel.celery_config import CALLBACK_QUEUE, CALLBACK_TASK, TRANSLATE_TASK, celery_config
from stapel.presence import read_all, reserved_task_ids
from stapel.settings import Settings

log = logging.getLogger(__name__)

PRIORITY_SEP = ":"
SEGMENTS_HEADER = "stapel_segments"
"""A chunk message's size, also in its headers, where a worker taking messages along
reads it without decoding the body (workers/takealong.py)."""
INTERACTIVE_HEADER = "stapel_interactive"
"""Set on an interactive lane's chunk message: a worker's consumer does not pause after
delivering it (its task takes nothing along: workers/takealong.py `pace_consumer`)."""

INTERACTIVE_PRIORITY = 10
"""The interactive lane: one above the API's most urgent (9), given only to the compat
dialects' synchronous requests. The broker serves it as its most urgent, the batcher
above every job, and a worker never hands such a chunk back for lack of room."""
URGENT_PRIORITY = 9
URGENT_UP_TO = 64
"""A chunk of at most this many segments at the API's most urgent priority (9, after
fair share) takes the interactive lane's short cuts on a worker: it skips the segment
budget (workers/pipeline.py), waits for no company and heads a small batch
(workers/batcher.py). A larger priority-9 job is bulk work served first, in full batches.
Fair share lowers a flooding tenant's later jobs below 9."""


@dataclass(frozen=True)
class ChunkMessage:
    """One chunk's task message, as it is sent."""

    chunk_id: str
    job_id: str
    pool: str
    priority: int
    """The API's scale (9 most urgent); the broker's is `broker.broker_priority`."""
    queue: str
    segments: int
    """The chunk's size, sent along so a worker can budget without asking the DB."""


def make_celery(settings: Settings) -> Celery:
    """Return a Celery app configured from settings, used only to send tasks."""
    celery = Celery("stapel")
    celery.conf.update(celery_config(settings))
    return celery


def fast_lane(priority: int, segments: int) -> bool:
    """Whether a chunk of `segments` at `priority` (the API's scale) takes the lane's short cuts.

    The interactive lane always does; a priority-9 chunk when it is small (URGENT_UP_TO).
    """
    return priority >= INTERACTIVE_PRIORITY or (
        priority >= URGENT_PRIORITY and segments <= URGENT_UP_TO
    )


def broker_priority(priority: int) -> int:
    """Map the API's priority (9 most urgent) to Redis's (0 served first)."""
    return max(0, 9 - priority)  # the interactive lane (10) shares Redis's first level


_publishers: weakref.WeakKeyDictionary[Celery, redis.Redis] = weakref.WeakKeyDictionary()
_publishers_lock = threading.Lock()


def _publisher(celery: Celery) -> redis.Redis:
    """Return the Redis client that pushes this Celery app's chunk messages (one per app).

    Made once under a lock: a second client made by a racing thread would replace the
    first, and a client collected closes its connection pool under whoever still uses it.
    """
    client = _publishers.get(celery)
    if client is not None:
        return client
    with _publishers_lock:
        client = _publishers.get(celery)
        if client is None:
            options = celery.conf.broker_transport_options
            client = redis.Redis.from_url(
                celery.conf.broker_url,
                socket_connect_timeout=options.get("socket_connect_timeout"),
                socket_timeout=options.get("socket_timeout"),
            )
            _publishers[celery] = client
    return client


SHORT_REPR = 200
"""Up to this length a task's args are shown by repr(), which equals Celery's saferepr there."""
_PLAIN = re.compile(r"[A-Za-z0-9_.:-]*")
"""Strings saferepr writes as repr does (quotes, backslashes and escapes differ)."""


def _short_repr(value: list | dict) -> str | None:
    """Return repr(value) for a chunk's short, flat args; None lets Celery's saferepr do it.

    A chunk's args are one id and its kwargs a flag or two (a sixtieth of a POST's CPU
    went to saferepr); segments given inline are left to saferepr, which truncates.
    """
    items = value.values() if isinstance(value, dict) else value
    if all(
        isinstance(item, bool | int) or (isinstance(item, str) and _PLAIN.fullmatch(item))
        for item in items
    ):
        text = repr(value)
        if len(text) <= SHORT_REPR:
            return text
    return None


def publish(
    celery: Celery,
    name: str,
    task_id: str,
    args: list,
    kwargs: dict,
    queue: str,
    priority: int,
    *,
    pending: tuple[str, str] | None = None,
    headers: dict | None = None,
) -> None:
    """Push a task message straight onto its queue's Redis list, as Celery would.

    The message is Celery's own (protocol 2, built by `app.amqp.as_task_v2`) in kombu's
    Redis envelope (JSON body, base64, the anonymous exchange routing to the queue), so a
    worker cannot tell it from `send_task`'s: `tests/stapel/test_broker.py` compares the
    two. What it skips is the cost of kombu's publish path around one LPUSH (a producer
    from the pool, a new Redis client object per message), which was a sixth of a POST's
    CPU. `priority` is Redis's (0 served first); `headers` are added to Celery's, as
    `send_task(headers=...)` adds them.
    """
    extra = headers
    headers, properties, body, _ = celery.amqp.as_task_v2(
        task_id,
        name,
        args,
        kwargs,
        reply_to=celery.thread_oid,
        ignore_result=None,
        argsrepr=_short_repr(args),
        kwargsrepr=_short_repr(kwargs),
    )
    if extra:
        headers.update(extra)
    envelope = {
        "body": base64.b64encode(json.dumps(body).encode()).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": headers,
        "properties": {
            **properties,
            "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": queue},
            "priority": priority,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
        },
    }
    key = f"{queue}{PRIORITY_SEP}{priority}" if priority else queue
    client = _publisher(celery)  # held while its pipeline runs
    if pending is None:
        client.lpush(key, json.dumps(envelope))
        return
    # The broker is the quota's Redis (celery_config: broker_url is redis_url).
    pipe = client.pipeline(transaction=False)
    pipe.lpush(key, json.dumps(envelope))
    pipe.zrem(*pending)
    pipe.execute()


def send_chunk(
    celery: Celery, message: ChunkMessage, task_id: str, *, pending: tuple[str, str] | None = None
) -> bool:
    """Send one chunk's task under task_id; False (and a log line) if the broker is down.

    `pending`: a submission's place among its tenant's pending ones (stapel.quotas),
    ended in the same round trip.
    """
    kwargs: dict = {} if message.segments is None else {"segments": message.segments}
    headers = None if message.segments is None else {SEGMENTS_HEADER: message.segments}
    if message.priority >= INTERACTIVE_PRIORITY:
        kwargs["interactive"] = True
        headers = {**(headers or {}), INTERACTIVE_HEADER: 1}
    try:
        publish(
            celery,
            TRANSLATE_TASK,
            task_id,
            [message.chunk_id],
            kwargs,
            message.queue,
            broker_priority(message.priority),
            pending=pending,
            headers=headers,
        )
    except (OperationalError, redis.RedisError, OSError) as exc:
        log.warning(
            "send failed logid=%s chunk_id=%s error=%s; the watchdog will resend",
            message.job_id,
            message.chunk_id,
            type(exc).__name__,
        )
        return False
    return True


def send_callback(celery: Celery, job_id: str) -> bool:
    """Queue the delivery of a job's callback; False (logged) if the broker is down."""
    try:
        celery.send_task(CALLBACK_TASK, args=[job_id], queue=CALLBACK_QUEUE)
    except (OperationalError, redis.RedisError, OSError) as exc:
        log.warning(
            "callback send failed logid=%s error=%s; the watchdog will resend",
            job_id,
            type(exc).__name__,
        )
        return False
    return True


def waiting_task_ids(client: redis.Redis, queues: list[str]) -> set[str]:
    """Return the ids of task messages still waiting in the queues (all priorities).

    Messages already delivered (Redis's `unacked` hash) do not count: a chunk that stays
    `queued` past the grace period after its message was delivered lost its worker
    between delivery and claim, and sending it again is safe (the claim is a
    compare-and-set), while waiting for the visibility timeout would take hours. A
    delivered message whose task waits in a live worker's line for room is waiting too
    (its presence record lists it: stapel.presence.reserved_task_ids).
    """
    ids = reserved_task_ids(read_all(client))
    keys = [q if p == 0 else f"{q}{PRIORITY_SEP}{p}" for q in queues for p in range(10)]
    for key in keys:
        for raw in client.lrange(key, 0, -1):
            ids.add(_task_id(json.loads(raw)))
    ids.discard("")
    return ids


def _task_id(message: dict) -> str:
    return str(message.get("headers", {}).get("id", ""))
