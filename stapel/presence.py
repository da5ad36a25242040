"""Worker presence in Redis: which workers are alive, busy, and which models they hold.

Each worker process refreshes `stapel:worker:<hostname>` every PRESENCE_INTERVAL_S with
a short expiry, so a dead worker disappears on its own. The autoscaler reads these keys
to choose which pods are cheapest to remove (idle first, then fewest models loaded).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable

import redis

log = logging.getLogger(__name__)

KEY_PREFIX = "stapel:worker:"
PRESENCE_INTERVAL_S = 5.0
PRESENCE_TTL_S = 20


def presence_key(hostname: str) -> str:
    """Return the Redis key of one worker's presence record."""
    return KEY_PREFIX + hostname


def publish(client: redis.Redis, hostname: str, record: dict) -> None:
    """Write one worker's presence record with its expiry."""
    client.set(presence_key(hostname), json.dumps(record), ex=PRESENCE_TTL_S)


def read_all(client: redis.Redis) -> dict[str, dict]:
    """Return hostname -> presence record for every live worker."""
    keys = list(client.scan_iter(match=KEY_PREFIX + "*", count=500))
    if not keys:
        return {}
    records = {}
    for key, raw in zip(keys, client.mget(keys), strict=True):
        if raw is not None:
            name = (key.decode() if isinstance(key, bytes) else key)[len(KEY_PREFIX) :]
            records[name] = json.loads(raw)
    return records


class Publisher:
    """A daemon thread that keeps this worker's presence record fresh."""

    def __init__(self, client: redis.Redis, hostname: str, snapshot: Callable[[], dict]) -> None:
        self.client, self.hostname, self.snapshot = client, hostname, snapshot
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="presence", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        try:
            self.client.delete(presence_key(self.hostname))
        except redis.RedisError:
            pass

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                publish(self.client, self.hostname, {**self.snapshot(), "updated": time.time()})
            except redis.RedisError as exc:
                log.warning("presence not published worker=%s error=%s", self.hostname, exc)
            self._stop.wait(PRESENCE_INTERVAL_S)


SERVED_CACHE_S = 2.0
"""How long a process trusts its view of which model queues workers serve."""


class ServedQueues:
    """The model queues live workers consume, read from presence and cached briefly."""

    def __init__(self, client: redis.Redis, cache_s: float = SERVED_CACHE_S) -> None:
        self.client, self.cache_s = client, cache_s
        self._read_at, self._served = float("-inf"), frozenset[str]()
        self._lock = threading.Lock()

    def get(self) -> frozenset[str]:
        """Return the served model queues (empty when Redis cannot be read)."""
        with self._lock:
            if time.monotonic() - self._read_at > self.cache_s:
                try:
                    self._served = frozenset(served_model_queues(read_all(self.client)))
                except redis.RedisError:
                    self._served = frozenset()
                self._read_at = time.monotonic()
            return self._served


def served_model_queues(records: dict[str, dict]) -> set[str]:
    """Return the model queues some live worker consumes, from presence records."""
    return {
        model_queue(r.get("pool", ""), pair)
        for r in records.values()
        for pair in r.get("models", [])
    }


def model_queue(pool: str, pair: str) -> str:
    """Return the queue of a pool's workers that have pair loaded (`cpu.en-de`)."""
    return f"{pool}.{pair}"
