"""Errors as JSON: {"error": {"code", "message"}} with the right status."""

from __future__ import annotations

import json
import logging
import socket

import redis
from flask import Flask, jsonify
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


def gunicorn_error(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    """Write one of gunicorn's own refusals (414, bad request line...) as a JSON error.

    gunicorn answers these before the app sees the request, in HTML; this replaces its
    `util.write_error` so they come in the API's shape: 414 `uri_too_long`, 400
    `bad_request`, 431 `request_header_fields_too_large`, ...
    """
    from gunicorn import util

    code = reason.lower().replace(" ", "_").replace("-", "_")
    body = json.dumps({"error": {"code": code, "message": mesg or reason}}).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + body)


def json_gunicorn_errors() -> None:
    """Make gunicorn, when it serves the app, write its own errors as JSON (see above)."""
    try:
        from gunicorn import util
    except ImportError:
        return
    util.write_error = gunicorn_error
