"""The Procfile's access logger writes gunicorn's own default line, cheaper."""

from __future__ import annotations

import base64
import logging
import re
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger

from app.access_log import AccessLogger

STAMP = re.compile(r"\[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\]")


def environ(**changes) -> dict:
    base = {
        "REMOTE_ADDR": "10.0.0.7",
        "REQUEST_METHOD": "GET",
        "RAW_URI": "/v1/jobs/abc?x=1",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_USER_AGENT": "deepl-python/1.19",
        "HTTP_AUTHORIZATION": "Bearer stp_secret",
        "wsgi.url_scheme": "http",
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


CASES = [
    ("a read", environ(), "200 OK", 512),
    ("a status as a number, nothing sent", environ(REQUEST_METHOD="POST"), 202, None),
    (
        "quotes in what the client sent",
        environ(
            RAW_URI='/v1/jobs?q="x"',
            HTTP_REFERER='https://e.com/"a"',
            HTTP_USER_AGENT='evil" agent',
        ),
        "404 NOT FOUND",
        0,
    ),
    (
        "a Basic user, no address",
        environ(
            REMOTE_ADDR=None,
            HTTP_AUTHORIZATION="Basic " + base64.b64encode(b"ops:pw").decode(),
        ),
        "401 UNAUTHORIZED",
        17,
    ),
]


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def logged(logger_class, access_log_format: str | None = None, *case) -> str:
    cfg = Config()
    cfg.set("accesslog", "-")
    if access_log_format:
        cfg.set("access_log_format", access_log_format)
    logger = logger_class(cfg)
    lines = Lines()
    logger.access_log.addHandler(lines)
    try:
        env, status, sent = case
        resp = SimpleNamespace(status=status, sent=sent, headers=[("X-Request-Id", "r1")])
        req = SimpleNamespace(headers=[("HOST", "api"), ("AUTHORIZATION", "Bearer stp_secret")])
        logger.access(resp, req, env, timedelta(microseconds=1500))
    finally:
        logger.access_log.removeHandler(lines)
    (line,) = lines.lines
    return line


@pytest.mark.parametrize(("what", "env", "status", "sent"), CASES, ids=[c[0] for c in CASES])
def test_the_line_is_gunicorns_default_line(what, env, status, sent):
    ours = logged(AccessLogger, None, env, status, sent)
    theirs = logged(Logger, None, env, status, sent)
    assert STAMP.sub("[T]", ours, count=1) == STAMP.sub("[T]", theirs, count=1)
    assert "stp_secret" not in ours
    stamp = STAMP.search(ours).group(1)
    written = time.mktime(time.strptime(stamp, "%d/%b/%Y:%H:%M:%S %z"))
    assert abs(written - time.time()) < 5, "the cached time is this second's"


def test_another_format_is_gunicorns_own():
    fmt = "%(m)s %(U)s %({x-request-id}o)s %(M)s"
    case = CASES[0][1:]
    assert logged(AccessLogger, fmt, *case) == logged(Logger, fmt, *case) == "GET None r1 1"
