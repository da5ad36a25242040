"""Rate limits per tenant, counted in Redis so every web process shares them.

Flask-Limiter with its Redis storage, fixed windows. Submissions (POST /v1/jobs and
cancel) share one limit per tenant (STAPEL_RATE_SUBMIT), every other /v1 read shares
another (STAPEL_RATE_READ), and so does loading the page at `/` (keyed by address, as
it carries no key; all the page then does is /v1 calls, counted as any client's). All
keys of a tenant count together, so a second key buys no second share. Probes,
/metrics, the OpenAPI document, /docs and the page's static files have none. The limit
is checked once the key is authenticated (the /v1 blueprint sets g.tenant_id
first), so it is keyed by the tenant's id and no key reaches Redis. One round trip to
Redis per request (the window's counter raised with its expiry, in one script); only a
refused request reads the window's reset time for its Retry-After.
When Redis is unreachable the limiter fails open: the request is served and a warning
logged; the submission path itself then answers 503 (its quota and queue need Redis).
"""

from __future__ import annotations

import logging
import time

from flask import Flask, current_app, g, request
from flask_limiter import Limiter

log = logging.getLogger(__name__)

SUBMIT_ENDPOINTS = ("v1.create_job", "v1.cancel_job")
"""Endpoints counted against the submission limit; all other v1 endpoints are reads."""
LIMITED = ("v1.", "page.")
"""Endpoint prefixes under the limits: the API and the page (which counts as a read)."""
OFF = ("off", "none", "0")
"""Values of STAPEL_RATE_* that turn the limit off."""


def rate_key() -> str:
    """Return who a request counts against: its tenant, else (unauthenticated) its address."""
    tenant = g.get("tenant_id")
    if tenant:
        return "tenant:" + tenant
    return "addr:" + (request.remote_addr or "unknown")


def init_limits(app: Flask, redis_url: str, submit: str, read: str) -> Limiter:
    """Attach the per-tenant limits to the app's /v1 endpoints (call after registering them)."""
    limiter = Limiter(
        key_func=rate_key,
        storage_uri=redis_url,
        storage_options={"socket_connect_timeout": 1, "socket_timeout": 1},
        strategy="fixed-window",
        # No X-RateLimit-* headers: they cost two more Redis round trips per request
        # (the window's count and expiry). A 429 still says when to retry (Retry-After).
        headers_enabled=False,
        swallow_errors=True,
        key_prefix="stapel:rate",
    )
    limiter.init_app(app)
    app.extensions["stapel_limiter"] = limiter
    logging.getLogger("flask-limiter").addFilter(_warn_once_per_error)
    for endpoint, view in list(app.view_functions.items()):
        if endpoint.startswith(LIMITED):
            scope, value = ("submit", submit) if endpoint in SUBMIT_ENDPOINTS else ("read", read)
            if value.strip().lower() not in OFF:
                app.view_functions[endpoint] = limiter.shared_limit(value, scope=scope)(view)
    return limiter


def _warn_once_per_error(record: logging.LogRecord) -> bool:
    """Turn the limiter's swallowed-storage-error traceback into one warning line."""
    if record.exc_info and record.levelno >= logging.ERROR:
        exc = record.exc_info[1]
        log.warning("rate limit storage unreachable, failing open error=%s", type(exc).__name__)
        return False
    return True


def retry_after() -> int:
    """Return the seconds until the breached window of this request resets (at least 1)."""
    current = current_app.extensions["stapel_limiter"].current_limit
    if current is None:
        return 1
    return max(1, int(current.reset_at - time.time()) + 1)
