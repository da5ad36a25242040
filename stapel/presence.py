"""Worker presence in Redis: which workers are alive, busy, and which models they hold.

Each worker process refreshes `stapel:worker:<hostname>` every PRESENCE_INTERVAL_S with
a short expiry, so a dead worker disappears on its own. A record holds the worker's
pool (empty for a worker that does not consume its pool queue, like the control
worker), busy tasks, loaded models, segment budget, segments held, and the segments and
task ids waiting in its line for room. The web routes by the room (stapel.dispatch),
the watchdog counts the waiting task ids as alive, and the autoscaler chooses which
pods are cheapest to remove (idle first, then fewest models loaded).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping

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
"""How long a process trusts its view of the workers' room."""


class Room(dict[str, int]):
    """Model queue -> segments its roomiest live worker can still take (see stapel.dispatch).

    `fingerprints` is model queue -> the model fingerprint (stapel.mtcache) that every
    live worker holding the queue's pair shares; a queue whose workers disagree (a model
    update rolling out) or do not say (an older worker) has none. A plain mapping (a
    hand-back's `{}`) stands for a room without fingerprints. `languages` is model queue
    -> the languages of the multilingual model it is named after (a worker holding
    NLLB-200 consumes `cpu.<its folder>`, which serves every pair of those languages).
    """

    def __init__(
        self,
        room=(),
        fingerprints: dict[str, str] | None = None,
        languages: dict[str, frozenset[str]] | None = None,
    ) -> None:
        super().__init__(room)
        self.fingerprints = fingerprints or {}
        self.languages = languages or {}


def agreed_fingerprint(room: Mapping[str, int], queue: str) -> str | None:
    """Return the fingerprint every live worker of a model queue shares, if one does."""
    return room.fingerprints.get(queue) if isinstance(room, Room) else None


def free_segments(record: dict) -> int:
    """Return how many segments a worker can still take, from its presence record.

    Its budget less what it translates and what already waits in it for room; a record
    without a budget (a control worker, an old worker) has no room to offer.
    """
    budget = int(record.get("budget") or 0)
    return max(0, budget - int(record.get("held") or 0) - int(record.get("waiting_segments") or 0))


def model_room(records: dict[str, dict]) -> Room:
    """Return model queue -> most free segments among the live workers that consume it,
    with the fingerprint they agree on per queue (Room.fingerprints)."""
    room: dict[str, int] = {}
    seen: dict[str, set[str | None]] = {}
    languages: dict[str, frozenset[str]] = {}
    for record in records.values():
        pool = record.get("pool")
        if not pool:
            continue
        for model, codes in (record.get("languages") or {}).items():
            languages[model_queue(pool, model)] = frozenset(codes)
        fingerprints = record.get("fingerprints") or {}
        for pair in record.get("models") or []:
            queue = model_queue(pool, pair)
            room[queue] = max(room.get(queue, 0), free_segments(record))
            seen.setdefault(queue, set()).add(fingerprints.get(pair))
    agreed = {q: fp for q, fps in seen.items() if len(fps) == 1 and (fp := next(iter(fps)))}
    return Room(room, agreed, languages)


def reserved_task_ids(records: dict[str, dict]) -> set[str]:
    """Return the task ids live workers hold while waiting for room (not lost: waiting)."""
    return {tid for r in records.values() for tid in r.get("waiting") or []}


class ServedQueues:
    """This process's view of the workers' room, read from presence and cached briefly.

    The view is spent as it is used (a dispatch that routes 2,000 segments to a model
    queue, a hand-back that counts on another worker's room), so a burst within one
    cache period does not promise the same room twice.
    """

    def __init__(self, client: redis.Redis, cache_s: float = SERVED_CACHE_S) -> None:
        self.client, self.cache_s = client, cache_s
        self._read_at = float("-inf")
        self._records: dict[str, dict] = {}
        self._room = Room()
        self._lock = threading.Lock()

    def _refresh(self) -> None:
        if time.monotonic() - self._read_at > self.cache_s:
            try:
                self._records = read_all(self.client)
            except redis.RedisError:
                self._records = {}
            self._room = model_room(self._records)
            self._read_at = time.monotonic()

    def get(self) -> Room:
        """Return the model queues' room (empty when Redis cannot be read); dispatch spends it."""
        with self._lock:
            self._refresh()
            return self._room

    def take_elsewhere(self, pool: str, me: str, segments: int) -> bool:
        """Spend room for segments on another live worker of the pool; False if none has it."""
        with self._lock:
            self._refresh()
            for name, record in self._records.items():
                if name == me or record.get("pool") != pool:
                    continue
                if free_segments(record) >= segments:
                    record["held"] = int(record.get("held") or 0) + segments
                    return True
            return False


def served_model_queues(records: dict[str, dict]) -> Room:
    """Return the model queues some live worker consumes, with their room (model_room)."""
    return model_room(records)


def model_queue(pool: str, pair: str) -> str:
    """Return the queue of a pool's workers that have pair loaded (`cpu.en-de`)."""
    return f"{pool}.{pair}"
