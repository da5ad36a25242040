"""Languages and health probes."""

from __future__ import annotations

import hmac

import redis
from flask import Response, jsonify, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from app.api.blueprints import health, v1
from app.api.errors import RETRY_AFTER_S
from app.web import db_session, stapel
from stapel.exceptions import Unauthorized
from stapel.model_dirs import language_names
from stapel.pivot import served


@v1.get("/languages")
def languages():
    """List the languages (ISO 639-1 codes where one exists, with names) and the pairs
    the model root offers, each with the model that serves it or the language it is
    translated through (pivot)."""
    settings = stapel().settings
    pairs = served(settings.model_root, settings.pivot)
    names = language_names(pairs)
    return jsonify(
        {
            "languages": [{"code": code, "name": label} for code, label in names.items()],
            "pairs": [
                {"source": m.source, "target": m.target, "pair": p}
                | ({"via": m.via} if m.via else {"model": m.model})
                for p, m in pairs.items()
            ],
        }
    )


@health.get("/healthz")
def healthz():
    """Answer 200 while the process is alive."""
    return jsonify({"status": "ok"})


@health.get("/readyz")
def readyz():
    """Answer 200 when the DB and Redis are reachable, else 503 naming what is not."""
    checks = {"database": "ok", "redis": "ok"}
    try:
        db_session().execute(text("SELECT 1"))
    except Exception as exc:  # any failure means not ready; the probe must not 500
        checks["database"] = f"unavailable: {type(exc).__name__}"
    try:
        client = redis.Redis.from_url(
            stapel().settings.redis_url, socket_connect_timeout=2, socket_timeout=2
        )
        client.ping()
        client.close()
    except redis.RedisError as exc:
        checks["redis"] = f"unavailable: {type(exc).__name__}"
    ready = all(v == "ok" for v in checks.values())
    response = jsonify({"status": "ready" if ready else "unavailable", "checks": checks})
    if not ready:
        response.status_code = 503
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
    return response


@health.get("/metrics")
def metrics():
    """Serve Prometheus metrics: this process's counters and gauges read from the DB.

    With STAPEL_METRICS_TOKEN set, only `Authorization: Bearer <that token>` gets them;
    tenants' API keys are not accepted here.
    """
    token = stapel().settings.metrics_token
    if token:
        scheme, _, given = (request.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), token.encode()
        ):
            raise Unauthorized("/metrics needs 'Authorization: Bearer <STAPEL_METRICS_TOKEN>'")
    return Response(generate_latest(stapel().metrics), mimetype=CONTENT_TYPE_LATEST)
