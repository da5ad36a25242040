"""Telling workers at once that a job's waiting segments are no longer wanted.

A cancel is committed in the database first; then its job id is published on a Redis
channel that every worker listens to, and each worker takes that job's waiting
segments out of its batchers within milliseconds, instead of translating on until the
chunk's task notices the cancel at its next write. The message is a hint, not the
truth: a worker that misses it (not subscribed yet, Redis away) still stops at its next
batch, when the claim check fails.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import redis

log = logging.getLogger(__name__)

CHANNEL = "stapel:withdraw"
RECONNECT_S = 2.0


def announce(client: redis.Redis, job_id: str) -> None:
    """Publish that job_id's waiting segments can go (call after the cancel committed)."""
    try:
        client.publish(CHANNEL, job_id)
    except redis.RedisError as exc:
        log.warning("withdrawal not announced logid=%s error=%s", job_id, type(exc).__name__)


class Listener:
    """A daemon thread calling `on_job(job_id)` for every announced withdrawal."""

    def __init__(self, client: redis.Redis, on_job: Callable[[str], object]) -> None:
        self.client, self.on_job = client, on_job
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="withdrawals", daemon=True)

    def start(self) -> Listener:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                pubsub = self.client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(CHANNEL)
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message is not None:
                        data = message["data"]
                        self.on_job(data.decode() if isinstance(data, bytes) else str(data))
            except redis.RedisError as exc:
                log.warning("withdrawal listener reconnecting error=%s", type(exc).__name__)
                self._stop.wait(RECONNECT_S)
