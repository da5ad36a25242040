"""Chunk messages waiting behind a task's own, taken along by it in one Redis round trip.

Celery delivers one message at a time, and each costs the worker a BRPOP, a round trip
to record it among the unacknowledged, the consumer's request and event bookkeeping and
a task thread's trace: about 0.6 ms of its CPU, most of a one-segment job's cost where
the model is fast (docs/design/worker-cost.md). So a chunk's task takes the small chunk
messages waiting behind its own on the same queue, up to TAKE_AT_MOST within the room
it holds in the worker's segment budget (TAKE_ROOM segments at most), in one script
that moves each from its queue list into Redis's `unacked` hash and index exactly as
kombu's QoS records a delivered message. Their chunks and the task's own run together
as one unit on the task's thread (`pipeline.run_taken`: one claim request,
their segments in the batcher together, one finish request), and the taken messages are
acknowledged together when the unit ends. Jobs that arrive one by one would each
find the consumer waiting in BRPOP and be delivered alone, so after delivering a small
chunk's message the consumer asks only for Redis's first level (the interactive lane and
the API's priority 9) for STAPEL_CONSUME_PAUSE_MS (`pace_consumer`): what arrives
meanwhile at the other levels is taken along by the next delivered task.

What a delivered message promises, a taken one keeps: its chunk has its own claim,
outcome and failure; a worker that dies leaves the messages in `unacked`, where the
watchdog treats their chunks as delivered ones (queued: sent again after the grace;
running: requeued after the heartbeat timeout) and kombu restores them after the
visibility timeout. Only messages of the translate task that carry their size, at most
TAKE_SEGMENTS each, are taken, highest priority first as BRPOP serves them; the first
other message is put back where it was and ends the take.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import redis
from kombu.transport import redis as kombu_redis
from redis.commands.core import Script

from stapel import metrics
from stapel.broker import INTERACTIVE_HEADER, PRIORITY_SEP, SEGMENTS_HEADER
from stapel.celery_config import TRANSLATE_TASK
from stapel.kombu_redis import Pace, QoS

log = logging.getLogger(__name__)

T = TypeVar("T")

TAKE_THREADS = 512
"""Threads for taken chunks that go on alone while their model loads, per worker
process; past that such a chunk stays in its unit, which waits for the load with it
(every claim of the unit heartbeating: pipeline._load_models)."""
TAKE_AT_MOST = 100
"""At most this many messages in one take (a committer group's size)."""
TAKE_SEGMENTS = 64
"""Only messages of chunks this small are taken: a large chunk is better left in the
queue for whichever worker of the pool has room (stapel.broker.URGENT_UP_TO's size)."""
TAKE_ROOM = 256
"""At most this many segments in one take: enough to batch a hundred one-segment jobs
together, little enough that a worker of a pool never takes minutes of another's work."""
PAUSE_OF_BATCH_WAIT = 0.8
"""The consumer's pause, unless STAPEL_CONSUME_PAUSE_MS sets it, as a share of the batch
wait (STAPEL_BATCH_WAIT_MS): what the pause holds back is then taken along in time to
join the batch that the delivered job's segments wait in (docs/design/worker-cost.md)."""
EMPTY_BACKOFF_S = 0.005
"""After a take found nothing, the next tasks this long skip the round trip (at most
half the consumer's pause: `pace_consumer`; so the task delivered after a pause always
looks)."""

_TAKE = """
local want, room, each = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local taken, held = {}, 0
local now = redis.call('TIME')
local at = tonumber(now[1]) + tonumber(now[2]) / 1000000
for i = 3, #KEYS do
  while #taken < want do
    local raw = redis.call('RPOP', KEYS[i])
    if not raw then break end
    local ok, message = pcall(cjson.decode, raw)
    local headers = ok and type(message) == 'table' and message.headers or nil
    local size = type(headers) == 'table' and tonumber(headers[ARGV[5]]) or nil
    if type(headers) ~= 'table' or headers.task ~= ARGV[4] or size == nil
        or size > each or held + size > room then
      redis.call('RPUSH', KEYS[i], raw)
      return {1, unpack(taken)}
    end
    local info = message.properties.delivery_info or {}
    local record = '[' .. raw .. ',' .. cjson.encode(info.exchange or '') .. ','
      .. cjson.encode(ARGV[6]) .. ']'
    redis.call('HSET', KEYS[1], message.properties.delivery_tag, record)
    redis.call('ZADD', KEYS[2], at, message.properties.delivery_tag)
    held = held + size
    taken[#taken + 1] = raw
  end
  if #taken >= want then break end
end
return {#taken >= want and 1 or 0, unpack(taken)}
"""
"""Returns whether messages were left waiting (1: the take stopped before the queue's
end), then the messages taken."""


def takes_along(headers: dict) -> bool:
    """Whether a delivered message's task takes along what waits behind it: a chunk's
    message that carries its size, small enough to be taken itself, not interactive."""
    size = headers.get(SEGMENTS_HEADER)
    return (
        headers.get("task") == TRANSLATE_TASK
        and size is not None
        and int(size) <= TAKE_SEGMENTS
        and not headers.get(INTERACTIVE_HEADER)
    )


def consume_pause_s(pause_ms: float | None, batch_wait_ms: float) -> float:
    """The consumer's pause in seconds: STAPEL_CONSUME_PAUSE_MS, or by default
    PAUSE_OF_BATCH_WAIT of the batch wait."""
    return (PAUSE_OF_BATCH_WAIT * batch_wait_ms if pause_ms is None else pause_ms) / 1000


def pace_consumer(pause_s: float, along: TakeAlong) -> None:
    """Pace this process's consumer: after it delivers a small chunk's message, its
    BRPOPs ask only for Redis's first level for pause_s (stapel.kombu_redis: the
    interactive lane and the API's priority 9 are delivered at once), so that what
    arrives meanwhile at the other levels waits in the queue and the next delivered task
    takes it along in one round trip instead of Celery delivering each
    (docs/design/worker-cost.md). Not while the last take left messages waiting: there
    the next delivery's task takes a full group anyway, and a pause would only leave
    fewer units running. 0 turns it off. An empty take's backoff stays within half the
    pause, so the task delivered after one looks for what it held back."""
    along.backoff_s = min(EMPTY_BACKOFF_S, pause_s / 2) if pause_s > 0 else EMPTY_BACKOFF_S
    QoS.pace = (
        Pace(pause_s, lambda headers: not along.backlog and takes_along(headers))
        if pause_s > 0
        else None
    )


@dataclass(frozen=True)
class Taken:
    """One message taken along: what its task would have been called with."""

    delivery_tag: str
    task_id: str
    chunk_id: str
    segments: int
    interactive: bool
    priority: int
    """Redis's (0 served first), as Celery's delivery_info gives it."""


def queue_keys(queue: str) -> list[str]:
    """The queue's Redis lists in the order BRPOP serves them (priority 0 first)."""
    return [queue] + [f"{queue}{PRIORITY_SEP}{p}" for p in range(1, 10)]


def _parse(raw: bytes) -> Taken:
    message = json.loads(raw)
    properties, headers = message["properties"], message["headers"]
    args, kwargs, _ = json.loads(base64.b64decode(message["body"]))
    return Taken(
        delivery_tag=properties["delivery_tag"],
        task_id=headers["id"],
        chunk_id=args[0],
        segments=int(kwargs.get("segments") or 0),
        interactive=bool(kwargs.get("interactive")),
        priority=int(properties.get("priority") or 0),
    )


class TakeAlong:
    """A worker's taking along: the script, the threads, and how many run now."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._script: Script | None = None
        self._threads = ThreadPoolExecutor(TAKE_THREADS, thread_name_prefix="taken")
        self._lock = threading.Lock()
        self._spawned = 0
        self._empty_until = 0.0
        self.backoff_s = EMPTY_BACKOFF_S
        self.backlog = False
        """Whether the last take left messages waiting: the consumer need not pause."""

    def take(self, queue: str, room: int) -> list[Taken]:
        """Move up to TAKE_AT_MOST small chunk messages from queue into `unacked`, within
        `room` segments; [] when none waits (or Redis is away)."""
        room = min(room, TAKE_ROOM)
        if room <= 0 or time.monotonic() < self._empty_until:
            return []
        raws: list[bytes] = []
        if self._script is None:
            self._script = self.client.register_script(_TAKE)
        try:
            left, *raws = self._script(
                keys=[
                    kombu_redis.Channel.unacked_key,
                    kombu_redis.Channel.unacked_index_key,
                    *queue_keys(queue),
                ],
                args=[TAKE_AT_MOST, room, TAKE_SEGMENTS, TRANSLATE_TASK, SEGMENTS_HEADER, queue],
            )
            self.backlog = bool(left)
        except redis.RedisError as exc:  # the task's own chunk goes on; nothing was moved
            log.warning("take along failed queue=%s error=%s", queue, type(exc).__name__)
        if not raws:
            self._empty_until = time.monotonic() + self.backoff_s
        return [_parse(raw) for raw in raws]

    def run(
        self,
        queue: str,
        room: int,
        pool: str,
        task_id: str,
        together: Callable[[list[Taken]], list[str | BaseException]],
    ) -> str:
        """Take what waits behind a task's message (within `room` segments) and run
        `together` on the taken messages (one outcome or exception for the task's chunk,
        then one for each taken one); ack them; return (or raise) the task's own outcome."""
        taken = self.take(queue, room)
        if taken:
            metrics.TAKEN_ALONG.labels(pool).inc(len(taken))
            log.info("took along count=%d queue=%s task=%s", len(taken), queue, task_id)
        # not acked when `together` raises: kombu restores them, the watchdog resends
        own, *outcomes = together(taken)
        for message, outcome in zip(taken, outcomes, strict=True):
            if isinstance(outcome, BaseException):  # acked as a failed task is
                # in the words Celery logs a delivered task's failure with
                task = f"{TRANSLATE_TASK}[{message.task_id}]"
                log.error("Task %s raised unexpected: %r", task, outcome, exc_info=outcome)
        self.ack(taken)
        if isinstance(own, BaseException):
            raise own
        return own

    def spawn(self, fn: Callable[[], T]) -> Future[T] | None:
        """Run fn on a take-along thread; None when all TAKE_THREADS are busy (the caller
        runs it itself)."""
        with self._lock:
            if self._spawned >= TAKE_THREADS:
                return None
            self._spawned += 1
        return self._threads.submit(self._counted, fn)

    def _counted(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        finally:
            with self._lock:
                self._spawned -= 1

    def ack(self, taken: list[Taken]) -> None:
        """Remove ended messages from `unacked`, in one round trip."""
        tags = [message.delivery_tag for message in taken]
        if not tags:
            return
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.zrem(kombu_redis.Channel.unacked_index_key, *tags)
            pipe.hdel(kombu_redis.Channel.unacked_key, *tags)
            pipe.execute()
        except redis.RedisError as exc:  # delivered again after the visibility timeout
            log.warning("taken acks not sent count=%d error=%s", len(tags), type(exc).__name__)
