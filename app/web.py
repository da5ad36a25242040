"""Per-request access to what create_app set up: settings, DB session, Celery client."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Any

import redis
from celery import Celery
from flask import Response, current_app, g, has_request_context, request
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.parse_slots import ParseSlots
from stapel.metrics import HTTP_REQUESTS
from stapel.presence import ServedQueues
from stapel.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Stapel:
    """The extension object stored in app.extensions["stapel"]."""

    settings: Settings
    engine: Engine
    reader: Engine
    """For one-statement reads: on a database server a second pool, in autocommit; on
    SQLite `engine` itself (stapel.db.make_reader)."""
    sessions: sessionmaker[Session]
    celery: Celery
    redis: redis.Redis
    served: ServedQueues
    metrics: CollectorRegistry
    parse_slots: ParseSlots

    def dispose(self) -> None:
        """Close the pools' connections (the reader's too, where it has its own)."""
        self.engine.dispose()
        if self.reader is not self.engine:
            self.reader.dispose()


def stapel() -> Stapel:
    """Return the current app's Stapel extension."""
    return current_app.extensions["stapel"]


def db_session() -> Session:
    """Return this request's session, opened on first use and closed at teardown."""
    if "db" not in g:
        g.db = stapel().sessions()
    return g.db


def close_session(_exc: BaseException | None = None) -> None:
    """Close the request's session if one was opened.

    By teardown the answer is made: a connection that broke meanwhile (a backend
    terminated, a failover) must not turn it into a 500. The pool drops that connection,
    so a warning is all that is left to do.
    """
    session = g.pop("db", None)
    if session is None:
        return
    try:
        session.close()
    except SQLAlchemyError as exc:
        log.warning("session close failed after the answer error=%s", type(exc).__name__)


REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def assign_request_id() -> None:
    """Take the request id from X-Request-ID (when well-formed) or make one."""
    given = request.headers.get(REQUEST_ID_HEADER, "")
    g.request_id = given if _REQUEST_ID.fullmatch(given) else os.urandom(16).hex()


def request_context() -> tuple[str | None, str | None]:
    """Return (request id, job id from the URL) for log lines inside a request."""
    if not has_request_context():
        return None, None
    return g.get("request_id"), (request.view_args or {}).get("job_id")


def echo_request_id(response: Response) -> Response:
    """Return the request id in the response and count the request for /metrics."""
    if "request_id" in g:
        response.headers[REQUEST_ID_HEADER] = g.request_id
    labels = (
        request.method if request.method in METHODS else "other",
        request.url_rule.rule if request.url_rule else "other",
        str(response.status_code),
    )
    counter = _counted.get(labels)
    if counter is None:  # labels() validates and locks: a child is looked up once
        counter = _counted[labels] = HTTP_REQUESTS.labels(*labels)
    counter.inc()
    return response


METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"))
"""Methods counted under their name; any other a client sends is `other` (bounded labels)."""
_counted: dict[tuple[str, str, str], Any] = {}
"""HTTP_REQUESTS's children by (method, route, status): routes and statuses are few."""
