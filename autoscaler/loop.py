"""One pool's control loop: observe, decide, act; every poll_s, surviving every outage."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from autoscaler.backends.base import Backend, BackendError
from autoscaler.config import PoolSettings
from autoscaler.load import read_counts, worker_views
from autoscaler.policy import Decision, Load, PolicyState, decide
from stapel.metrics import publish_decision
from stapel.presence import read_all
from stapel.unserved import unserved_chunks

log = logging.getLogger(__name__)


class PoolLoop:
    """Scales one pool; tick() is one observe-decide-act round."""

    def __init__(
        self,
        pool: PoolSettings,
        backend: Backend,
        sessions: sessionmaker[Session],
        redis_client: redis.Redis | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pool, self.backend, self.sessions = pool, backend, sessions
        self.redis, self.clock = redis_client, clock
        self.state = PolicyState()
        self._last_reason = ""
        self.unserved_starts = 0
        """Workers started because the pool's queued work had no live consumer."""
        self._stuck_at_max = False

    def _presence(self) -> dict[str, dict] | None:
        """Return the live workers' records; None when they could not be read."""
        if self.redis is None:
            return None
        try:
            return read_all(self.redis)
        except (redis.RedisError, ValueError) as exc:
            log.warning(
                "presence unavailable, using the DB's busy workers only pool=%s error=%s",
                self.pool.name,
                exc,
            )
            return None

    def tick(self) -> Decision | None:
        """Run one round; return the decision, or None when the data could not be read."""
        name = self.pool.name
        presence = self._presence()
        try:
            with self.sessions() as session:
                counts = read_counts(session, name)
                # without presence nobody can be told live: no pool counts as unserved
                unserved = (
                    0 if presence is None else unserved_chunks(session, presence).get(name, 0)
                )
        except SQLAlchemyError as exc:
            log.warning(
                "database unavailable, skipping this tick pool=%s error=%s: %s",
                name,
                type(exc).__name__,
                _cause(exc),
            )
            return None
        try:
            current = self.backend.replicas()
            views = worker_views(self.backend.workers(), counts.busy_workers, presence or {})
        except BackendError as exc:
            log.warning("backend unavailable, skipping this tick pool=%s error=%s", name, exc)
            return None
        busy = sum(1 for v in views if v.busy > 0)
        load = Load(counts.running, counts.queued, busy, unserved)
        decision = decide(load, current, self.pool.limits, self.clock(), self.state)
        if decision.changes(current):
            try:
                self.backend.scale(decision.replicas, views)
            except BackendError as exc:
                log.warning(
                    "scale failed, retrying next tick pool=%s to=%d error=%s",
                    name,
                    decision.replicas,
                    exc,
                )
                return decision
        self.state = decision.state
        self._report_unserved(unserved, current, decision.replicas)
        publish_decision(self.redis, name, current, decision.replicas, self.unserved_starts)
        if decision.changes(current) or decision.reason != self._last_reason:
            log.info(
                "decision pool=%s running=%d queued=%d busy=%d current=%d wanted=%d "
                "set=%d reason=%s",
                name,
                load.running,
                load.queued,
                load.busy_workers,
                current,
                decision.wanted,
                decision.replicas,
                decision.reason,
            )
        self._last_reason = decision.reason
        return decision

    def _report_unserved(self, unserved: int, current: int, replicas: int) -> None:
        """Log (a warning) and count the workers added for queued work nobody consumes."""
        if unserved and replicas > current:
            self.unserved_starts += replicas - current
            log.warning(
                "queued work has no live consumer, adding workers pool=%s chunks=%d "
                "current=%d set=%d",
                self.pool.name,
                unserved,
                current,
                replicas,
            )
        stuck = bool(unserved) and current >= self.pool.limits.max
        if stuck and not self._stuck_at_max:
            log.warning(
                "queued work has no live consumer and the pool is at its max pool=%s "
                "chunks=%d current=%d",
                self.pool.name,
                unserved,
                current,
            )
        self._stuck_at_max = stuck

    def run(self, stop: threading.Event) -> None:
        """Tick every poll_s until stop is set; log and go on after any error."""
        log.info(
            "loop started pool=%s limits=%s poll_s=%s",
            self.pool.name,
            self.pool.limits,
            self.pool.poll_s,
        )
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # the loop must outlive any one bad tick
                log.exception("tick failed pool=%s", self.pool.name)
            stop.wait(self.pool.poll_s)
        log.info("loop stopped pool=%s", self.pool.name)


def _cause(exc: SQLAlchemyError) -> str:
    """Return the driver's message, first line only (`no such table: chunks`: not migrated)."""
    message = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return message[0][:200] if message else "-"
