"""Rate limits per tenant, counted in Redis so every web process shares them.

Fixed windows: a window's counter lives in Redis and starts, with its expiry, at its
first hit. A web process does not go to Redis for every request: it takes a *lease* of
hits at a time (one script: INCRBY by the lease, the expiry set if missing, the count
and the time left read back), and spends it from memory until it is used up or the
window ends. A lease is at most LEASE_MAX hits and at most 1/LEASE_SPLIT of what the
window had left when the process last looked, so near the limit (and under small
limits: below LEASE_SPLIT a window, always) leases are one hit and the count is exact.
What this keeps and gives up:
- never more than the limit: a hit is counted in Redis before it is served, and a
  lease past the limit is granted only the part below it;
- leased hits die with their window (the lease ends by the window's expiry as Redis
  reported it, measured from before the call), so none carries into the next window;
- a process may hold hits it has not used yet, and another process may then be refused
  that many hits early: at most LEASE_MAX - 1 a process, fewer near the limit;
- once a process has seen its window full, it refuses the rest of that window without
  asking Redis (a flood of refused requests costs no round trip).
Submissions (POST /v1/jobs and cancel) share one limit per tenant (STAPEL_RATE_SUBMIT),
every other /v1 read shares another (STAPEL_RATE_READ), and so does loading the page at
`/` (keyed by address, as it carries no key; all the page then does is /v1 calls,
counted as any client's). All keys of a tenant count together, so a second key buys no
second share. Probes, /metrics, the OpenAPI document, /docs and the page's static files
have none. The limit is checked in the view, once the key is authenticated (the /v1
blueprint sets g.tenant_id first), so it is keyed by the tenant's id and no key reaches
Redis. When Redis is unreachable the limiter fails open: the request is served and a
warning logged; the submission path itself then answers 503 (its quota and queue need
Redis). Leases exist because a round trip per request was a third of a status read's
CPU (docs/design/rate-limit-leases.md).
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis
from flask import Flask, g, request
from limits import RateLimitItem, parse_many

log = logging.getLogger(__name__)

SUBMIT_ENDPOINTS = ("v1.create_job", "v1.cancel_job")
"""Endpoints counted against the submission limit; all other v1 endpoints are reads."""
LIMITED = ("v1.", "page.")
"""Endpoint prefixes under the limits: the API and the page (which counts as a read)."""
OFF = ("off", "none", "0")
"""Values of STAPEL_RATE_* that turn the limit off."""
KEY_PREFIX = "stapel:rate"


class RateLimited(Exception):
    """A request over one of its rate limits: 429 with Retry-After."""

    def __init__(self, limit: RateLimitItem, retry_after_s: int) -> None:
        super().__init__(str(limit))
        self.description = str(limit)
        """The limit in words, e.g. `1200 per 1 minute`."""
        self.retry_after_s = retry_after_s


LEASE_MAX = 16
"""The most hits of one window a process takes from Redis at once."""
LEASE_SPLIT = 16
"""A lease is at most this fraction (1/16) of what the window had left, at least one hit."""

_LEASE = """
local count = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2]) * 1000
end
return {count, ttl}
"""
"""Take ARGV[1] hits of the window KEYS[1] (ARGV[2] seconds long): its count and ms left."""


@dataclass
class _Lease:
    """Hits of one window that this process took from Redis."""

    hits: int
    """Taken and not used yet."""
    count: int
    """The window's count in Redis after the last lease: what every process took."""
    ends: float
    """time.monotonic() by which the window has surely ended (measured before the call)."""


class RateLimiter:
    """Fixed-window limits in Redis, checked by the views they wrap, taken in leases."""

    def __init__(self, redis_url: str) -> None:
        self.redis = redis.Redis.from_url(redis_url, socket_connect_timeout=1, socket_timeout=1)
        self._take = self.redis.register_script(_LEASE)
        self._leases: dict[str, _Lease] = {}
        self._lock = threading.Lock()

    def limited(self, view: Callable, value: str, scope: str, key: Callable[[], str]) -> Callable:
        """Return the view under the limits of `value` (`10/second;600/hour`), per key."""
        items = parse_many(value)

        @functools.wraps(view)
        def limited_view(*args, **kwargs):
            self.check(items, scope, key())
            return view(*args, **kwargs)

        return limited_view

    def check(self, items: list[RateLimitItem], scope: str, key: str) -> None:
        """Count one request against each limit; raise RateLimited past one of them."""
        for item in items:
            try:
                retry_after_s = self._hit(item, f"{KEY_PREFIX}:{item.key_for(scope, key)}")
            except (redis.RedisError, OSError) as exc:
                log.warning(
                    "rate limit storage unreachable, failing open error=%s", type(exc).__name__
                )
                return
            if retry_after_s:
                raise RateLimited(item, retry_after_s)

    def _hit(self, item: RateLimitItem, window: str) -> int:
        """Spend one hit of the window: 0 when served, else the seconds until it resets."""
        now = time.monotonic()
        with self._lock:
            lease = self._leases.get(window)
            if lease is not None and lease.ends > now:
                if lease.hits:
                    lease.hits -= 1
                    return 0
                if lease.count >= item.amount:
                    return _seconds(lease.ends - now)
                left = item.amount - lease.count
            else:
                left = item.amount
        size = max(1, min(LEASE_MAX, left // LEASE_SPLIT))
        count, ttl_ms = self._take(keys=[window], args=[size, item.get_expiry()])
        ends = now + ttl_ms / 1000
        granted = max(0, min(size, item.amount - (count - size)))
        with self._lock:
            lease = self._leases.get(window)
            if lease is not None and lease.ends > time.monotonic():
                lease.hits += granted  # the same window: another thread's lease came first
                lease.count = max(lease.count, count)
            else:
                if len(self._leases) >= 10_000:
                    self._forget_ended()
                lease = self._leases[window] = _Lease(granted, count, ends)
            if not lease.hits:
                return _seconds(lease.ends - time.monotonic())
            lease.hits -= 1
            return 0

    def _forget_ended(self) -> None:
        """Drop the leases of windows that have ended (called under the lock)."""
        now = time.monotonic()
        for window in [w for w, lease in self._leases.items() if lease.ends <= now]:
            del self._leases[window]


def _seconds(left: float) -> int:
    """Return a Retry-After for a window with `left` seconds to go (at least 1)."""
    return max(1, math.ceil(left))


def rate_key() -> str:
    """Return who a request counts against: its tenant, else (unauthenticated) its address."""
    tenant = g.get("tenant_id")
    if tenant:
        return "tenant:" + tenant
    return "addr:" + (request.remote_addr or "unknown")


def init_limits(app: Flask, redis_url: str, submit: str, read: str) -> RateLimiter:
    """Attach the per-tenant limits to the app's /v1 endpoints (call after registering them)."""
    limiter = RateLimiter(redis_url)
    app.extensions["stapel_limiter"] = limiter
    for endpoint, view in list(app.view_functions.items()):
        if endpoint.startswith(LIMITED):
            scope, value = ("submit", submit) if endpoint in SUBMIT_ENDPOINTS else ("read", read)
            if value.strip().lower() not in OFF:
                app.view_functions[endpoint] = limiter.limited(view, value, scope, rate_key)
    return limiter
