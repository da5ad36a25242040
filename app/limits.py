"""Rate limits per tenant, counted in Redis so every web process shares them.

Fixed windows, counted with the `limits` package's Redis storage (the window's counter
raised with its expiry in one script: one Redis round trip per request; only a refused
request reads the window's reset time for its Retry-After). Submissions (POST /v1/jobs
and cancel) share one limit per tenant (STAPEL_RATE_SUBMIT), every other /v1 read shares
another (STAPEL_RATE_READ), and so does loading the page at `/` (keyed by address, as
it carries no key; all the page then does is /v1 calls, counted as any client's). All
keys of a tenant count together, so a second key buys no second share. Probes,
/metrics, the OpenAPI document, /docs and the page's static files have none. The limit
is checked in the view, once the key is authenticated (the /v1 blueprint sets
g.tenant_id first), so it is keyed by the tenant's id and no key reaches Redis.
When Redis is unreachable the limiter fails open: the request is served and a warning
logged; the submission path itself then answers 503 (its quota and queue need Redis).
(Flask-Limiter did the same until 2026-12-03, evaluating every limit's filters and
running its check twice per request: docs/performance.md, "The API on 2026-12-03".)
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable

import redis
from flask import Flask, g, request
from limits import RateLimitItem, parse_many
from limits.storage import RedisStorage
from limits.strategies import FixedWindowRateLimiter

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


class RateLimiter:
    """Fixed-window limits in Redis, checked by the views they wrap."""

    def __init__(self, redis_url: str) -> None:
        self.storage = RedisStorage(
            redis_url, key_prefix=KEY_PREFIX, socket_connect_timeout=1, socket_timeout=1
        )
        self.window = FixedWindowRateLimiter(self.storage)

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
                allowed = self.window.hit(item, key, scope)
            except (redis.RedisError, OSError) as exc:
                log.warning(
                    "rate limit storage unreachable, failing open error=%s", type(exc).__name__
                )
                return
            if not allowed:
                raise RateLimited(item, self._retry_after(item, scope, key))

    def _retry_after(self, item: RateLimitItem, scope: str, key: str) -> int:
        """Return the seconds until the breached window resets (at least 1)."""
        try:
            reset = self.window.get_window_stats(item, key, scope).reset_time
        except (redis.RedisError, OSError):
            return 1
        return max(1, int(reset - time.time()) + 1)


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
