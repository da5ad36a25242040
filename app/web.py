"""Per-request access to what create_app set up: settings, DB session, Celery client."""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass

import redis
from celery import Celery
from flask import Response, current_app, g, request
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.broker import served_model_queues
from app.config import Settings
from app.presence import read_all

SERVED_CACHE_S = 2.0
"""How long the web trusts its view of which model queues workers serve."""


@dataclass
class Stapel:
    """The extension object stored in app.extensions["stapel"]."""

    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    celery: Celery
    redis: redis.Redis
    metrics: CollectorRegistry | None = None
    _served: tuple[float, set[str]] = (0.0, set())

    def served_queues(self) -> set[str]:
        """Return the model queues live workers consume (cached briefly; empty if unknown)."""
        read_at, served = self._served
        if time.monotonic() - read_at > SERVED_CACHE_S:
            try:
                served = served_model_queues(read_all(self.redis))
            except redis.RedisError:
                served = set()
            self._served = (time.monotonic(), served)
        return served


def stapel() -> Stapel:
    """Return the current app's Stapel extension."""
    return current_app.extensions["stapel"]


def db_session() -> Session:
    """Return this request's session, opened on first use and closed at teardown."""
    if "db" not in g:
        g.db = stapel().sessions()
    return g.db


def close_session(_exc: BaseException | None = None) -> None:
    """Close the request's session if one was opened."""
    session = g.pop("db", None)
    if session is not None:
        session.close()


REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def assign_request_id() -> None:
    """Take the request id from X-Request-ID (when well-formed) or make one."""
    given = request.headers.get(REQUEST_ID_HEADER, "")
    g.request_id = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex


def echo_request_id(response: Response) -> Response:
    """Return the request id in the response and count the request for /metrics."""
    from app.metrics import HTTP_REQUESTS

    if "request_id" in g:
        response.headers[REQUEST_ID_HEADER] = g.request_id
    HTTP_REQUESTS.labels(request.method, request.url_rule.rule if request.url_rule else "other",
                         str(response.status_code)).inc()
    return response
