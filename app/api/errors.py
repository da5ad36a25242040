"""Errors as JSON: {"error": {"code", "message"}} with the right status."""

from __future__ import annotations

import logging

import redis
from flask import Flask, jsonify, request
from sqlalchemy.exc import InterfaceError, OperationalError
from werkzeug.exceptions import HTTPException

from app.limits import RateLimited
from stapel.exceptions import RETRY_AFTER_S, StapelError

log = logging.getLogger(__name__)


def error_response(status: int, code: str, message: str, headers: dict | None = None):
    """Return a JSON error response."""
    response = jsonify({"error": {"code": code, "message": message}})
    response.status_code = status
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


TARGET_BYTES = 4094
"""The longest request target (path and query) a request may have: 414 beyond."""


def refuse_long_targets():
    """Refuse a request whose target is over TARGET_BYTES (414 `uri_too_long`).

    The HTTP server bounds the whole head (app.server); this keeps URLs to what proxies
    and logs carry, and answers in the API's shape.
    """
    environ = request.environ
    query = environ.get("QUERY_STRING", "")
    size = len(environ.get("PATH_INFO", "")) + (len(query) + 1 if query else 0)
    if size > TARGET_BYTES:
        return error_response(
            414, "uri_too_long", f"the request target is over {TARGET_BYTES} bytes"
        )
    return None


def register(app: Flask) -> None:
    """Install the handlers that turn every error into a JSON body."""

    @app.errorhandler(StapelError)
    def _stapel(exc: StapelError):
        headers = (
            {"WWW-Authenticate": "Bearer"} if exc.status == 401 else getattr(exc, "headers", None)
        )
        return error_response(exc.status, exc.code, exc.message, headers)

    @app.errorhandler(RateLimited)
    def _rate_limited(exc: RateLimited):
        wait = exc.retry_after_s
        return error_response(
            429,
            "rate_limited",
            f"rate limit of {exc.description} for this tenant exceeded; retry in {wait} s",
            {"Retry-After": str(wait)},
        )

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException):
        code = (exc.name or "error").lower().replace(" ", "_")
        return error_response(exc.code or 500, code, exc.description or exc.name)

    @app.errorhandler(OperationalError)
    @app.errorhandler(InterfaceError)
    def _db(exc: OperationalError | InterfaceError):
        log.warning("database unavailable error=%s", type(exc.orig).__name__)
        return error_response(
            503,
            "database_unavailable",
            "the database is unreachable; retry later",
            {"Retry-After": str(RETRY_AFTER_S)},
        )

    @app.errorhandler(redis.RedisError)
    def _redis(exc: redis.RedisError):
        log.warning("redis unavailable error=%s", type(exc).__name__)
        return error_response(
            503,
            "broker_unavailable",
            "the queue is unreachable; retry later",
            {"Retry-After": str(RETRY_AFTER_S)},
        )

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        log.exception("unhandled error")
        return error_response(500, "internal_error", "internal error")
