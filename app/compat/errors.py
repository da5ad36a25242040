"""Errors in each dialect's own shape, installed once per blueprint.

LibreTranslate answers `{"error": message}`, DeepL `{"message": message}`, and each maps
Stapel's statuses its own way (`Dialect`); the handlers here turn every error raised in a
dialect's routes into that shape, so no route builds an error body itself. Statuses
keep Stapel's meaning: 400 bad input, 403 a bad or missing key (401 in /v1), 429 a rate
limit or quota with Retry-After, 503 a store unreachable, 504 a translation past its
deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import redis
from flask import Blueprint, Response, jsonify
from sqlalchemy.exc import InterfaceError, OperationalError
from werkzeug.exceptions import HTTPException

from app.api.errors import RETRY_AFTER_S
from app.limits import RateLimited
from stapel.exceptions import StapelError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Dialect:
    """How a dialect shapes an error body, and its status for a Stapel status and code."""

    name: str
    body: Callable[[str], dict]
    status: Callable[[int, str], int]


def answer(dialect: Dialect, status: int, message: str, headers: dict | None = None) -> Response:
    """Return an error response in the dialect's shape."""
    response = jsonify(dialect.body(message))
    response.status_code = status
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def install(bp: Blueprint, dialect: Dialect) -> None:
    """Answer every error raised in bp's routes in the dialect's shape."""

    @bp.errorhandler(StapelError)
    def _stapel(exc: StapelError):
        status = dialect.status(exc.status, exc.code)
        return answer(dialect, status, exc.message, getattr(exc, "headers", None))

    @bp.errorhandler(RateLimited)
    def _rate_limited(exc: RateLimited):
        wait = exc.retry_after_s
        message = f"rate limit of {exc.description} for this API key exceeded; retry in {wait} s"
        status = dialect.status(429, "rate_limited")
        return answer(dialect, status, message, {"Retry-After": str(wait)})

    @bp.errorhandler(HTTPException)
    def _http(exc: HTTPException):
        status = exc.code or 500
        code = (exc.name or "error").lower().replace(" ", "_")
        return answer(dialect, dialect.status(status, code), exc.description or exc.name)

    @bp.errorhandler(OperationalError)
    @bp.errorhandler(InterfaceError)
    @bp.errorhandler(redis.RedisError)
    def _unavailable(exc: Exception):
        log.warning("store unavailable dialect=%s error=%s", dialect.name, type(exc).__name__)
        message = "the database or the queue is unreachable; retry later"
        return answer(dialect, 503, message, {"Retry-After": str(RETRY_AFTER_S)})

    @bp.errorhandler(Exception)
    def _unexpected(exc: Exception):
        log.exception("unhandled error dialect=%s", dialect.name)
        return answer(dialect, 500, "internal error")
