"""The web's access log (app.access_log.AccessLog): Apache's combined line per request."""

from __future__ import annotations

import base64
import logging
import re
import time

import pytest
from werkzeug.test import Client

from app.access_log import AccessLog

LINE = re.compile(
    r'^(?P<addr>\S+) - (?P<user>\S+) \[(?P<stamp>[^]]+)\] "(?P<request>(?:[^"\\]|\\.)*)" '
    r'(?P<status>\d{3}) (?P<sent>\d+|-) "(?P<referer>(?:[^"\\]|\\.)*)" '
    r'"(?P<agent>(?:[^"\\]|\\.)*)"$'
)


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def body_app(chunks: list[bytes], status: str = "200 OK"):
    """A WSGI app answering `chunks` one by one (a streamed body)."""

    def app(environ, start_response):
        start_response(status, [("Content-Type", "text/plain")])
        return iter(chunks)

    return app


def logged(app, path: str, **kwargs) -> tuple[dict[str, str], bytes]:
    lines = Lines()
    log = logging.getLogger("test.access")
    log.addHandler(lines)
    log.propagate = False
    try:
        response = Client(AccessLog(app, log)).open(path, **kwargs)
        data = response.get_data()
        response.close()
    finally:
        log.removeHandler(lines)
    (line,) = lines.lines
    match = LINE.match(line)
    assert match, line
    return match.groupdict(), data


def test_a_read_is_one_line_with_what_was_sent():
    fields, data = logged(
        body_app([b"abc", b"defgh"]),
        "/v1/jobs/abc?x=1",
        headers={"User-Agent": "deepl-python/1.19", "Referer": "https://e.com/"},
        environ_base={"REMOTE_ADDR": "10.0.0.7"},
    )
    assert data == b"abcdefgh"
    assert fields["addr"] == "10.0.0.7" and fields["user"] == "-"
    assert fields["request"] == "GET /v1/jobs/abc?x=1 HTTP/1.1"
    assert (fields["status"], fields["sent"]) == ("200", "8")
    assert (fields["referer"], fields["agent"]) == ("https://e.com/", "deepl-python/1.19")
    written = time.mktime(time.strptime(fields["stamp"], "%d/%b/%Y:%H:%M:%S %z"))
    assert abs(written - time.time()) < 5, "the cached time is this second's"


def test_nothing_sent_is_a_dash_and_the_status_is_the_apps():
    fields, _ = logged(body_app([], "204 No Content"), "/x", method="DELETE")
    assert (fields["request"], fields["status"], fields["sent"]) == (
        "DELETE /x HTTP/1.1",
        "204",
        "-",
    )


def test_quotes_from_the_client_are_escaped_and_the_path_percent_encoded():
    fields, _ = logged(
        body_app([b"x"], "404 NOT FOUND"),
        '/a b/"q"?q="x"',
        headers={"User-Agent": 'evil" agent', "Referer": 'https://e.com/"a"'},
    )
    assert fields["request"] == 'GET /a%20b/%22q%22?q=\\"x\\" HTTP/1.1'
    assert fields["agent"] == 'evil\\" agent' and fields["referer"] == 'https://e.com/\\"a\\"'


@pytest.mark.parametrize(
    ("authorization", "user"),
    [
        ("Basic " + base64.b64encode(b"ops:pw").decode(), "ops"),
        ("Basic not-base64!", "-"),
        ("Bearer stp_secretsecret", "-"),
    ],
)
def test_the_user_is_basic_auths_and_keys_are_masked(authorization, user):
    fields, _ = logged(
        body_app([b"{}"]),
        "/translate?auth_key=stp_secretsecret",
        headers={"Authorization": authorization},
    )
    assert fields["user"] == user
    assert fields["request"] == "GET /translate?auth_key=stp_*** HTTP/1.1"
