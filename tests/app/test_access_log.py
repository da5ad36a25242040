"""The web's access log (app.access_log.AccessLog): Apache's combined line per request."""

from __future__ import annotations

import base64
import re
import time

import pytest
from werkzeug.test import Client

from app.access_log import WHOLE_BODY_BYTES, AccessLog

LINE = re.compile(
    r'^(?P<addr>\S+) - (?P<user>\S+) \[(?P<stamp>[^]]+)\] "(?P<request>(?:[^"\\]|\\.)*)" '
    r'(?P<status>\d{3}) (?P<sent>\d+|-) "(?P<referer>(?:[^"\\]|\\.)*)" '
    r'"(?P<agent>(?:[^"\\]|\\.)*)"$'
)


class Body:
    """An app's body: `chunks` one by one, remembering whether it was closed."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks, self.closed = chunks, False

    def __iter__(self):
        return iter(self.chunks)

    def close(self) -> None:
        self.closed = True


def body_app(chunks: list[bytes], status: str = "200 OK", length: bool = False, bodies=None):
    """A WSGI app answering `chunks` (with a Content-Length header when `length`)."""

    def app(environ, start_response):
        headers = [("Content-Type", "text/plain")]
        if length:
            headers.append(("Content-Length", str(sum(map(len, chunks)))))
        start_response(status, headers)
        body = Body(chunks)
        if bodies is not None:
            bodies.append(body)
        return body

    return app


def logged(app, path: str, **kwargs) -> tuple[dict[str, str], bytes]:
    lines: list[str] = []
    response = Client(AccessLog(app, lines.append)).open(path, **kwargs)
    data = response.get_data()
    response.close()
    (line,) = lines
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


@pytest.mark.parametrize(
    ("size", "whole"), [(WHOLE_BODY_BYTES, True), (WHOLE_BODY_BYTES + 1, False)]
)
def test_a_small_body_is_handed_over_whole_and_a_large_one_streamed(size, whole):
    """Up to WHOLE_BODY_BYTES the middleware returns one list (granian writes it in one
    piece), already closed and logged; beyond, the app's own iterator is passed through."""
    chunks = [b"a" * (size - size // 2), b"b" * (size // 2)]
    bodies: list[Body] = []
    lines: list[str] = []
    app = AccessLog(body_app(chunks, length=True, bodies=bodies), lines.append)
    out = app({"REQUEST_METHOD": "GET", "PATH_INFO": "/r"}, lambda *a: None)
    assert isinstance(out, list) is whole
    assert bodies[0].closed is whole and len(lines) == int(whole)
    if not whole:
        assert b"".join(out) == b"".join(chunks) and not lines
        out.close()
        assert bodies[0].closed
    (line,) = lines
    assert f" 200 {size} " in line
