"""The web's access log: one line per request in Apache's combined format, on stdout.

`AccessLog` wraps the serving app (`app.serve()`, the Procfile's web role) as WSGI
middleware, so the line does not depend on the HTTP server:

    10.0.0.7 - ops [04/Dec/2026:14:30:00 +0000] "GET /v1/jobs/abc HTTP/1.1" 200 512 "-" "curl/8"

address, the Basic auth user (else `-`), the time, the request line, the status, the
bytes of body sent (`-` when none), the Referer and the User-Agent; double quotes in
what the client sent are escaped (`\\"`), and API keys and bearer tokens in the line are
masked as on every other log line (stapel.logs). The line is written once the body is
done: a streamed body when the server has sent it (or the client went away), a small
one when it is handed to the server whole. The time's text is made once a second.
"""

from __future__ import annotations

import base64
import binascii
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import quote

from stapel.logs import mask_secrets

_TARGET_SAFE = "/:@!$&'()*+,;=-._~%"
"""Characters the request target keeps as they are; the rest are percent-encoded again."""

WHOLE_BODY_BYTES = 64 * 1024
"""A response body up to this size (by its Content-Length) is handed over whole."""

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict, StartResponse], Iterable[bytes]]


def _quoted(value: str) -> str:
    return value.replace('"', '\\"')


def _user(environ: dict) -> str:
    """The user name of a Basic Authorization header, else '-'."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    scheme, _, encoded = auth.partition(" ")
    if scheme.lower() != "basic":
        return "-"
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return "-"
    return decoded.partition(":")[0] or "-"


def target(environ: dict) -> str:
    """The request target as the client sent it (WSGI gives the path decoded)."""
    path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    path = quote(path.encode("latin-1"), safe=_TARGET_SAFE)
    query = environ.get("QUERY_STRING", "")
    return f"{path}?{query}" if query else path


def stdout_lines() -> Callable[[str], None]:
    """Write each line to standard output in one write(2), outside the logging module
    (a LogRecord, its handlers and a flush were 6% of a status read's GIL-held samples);
    a line that cannot be written (stdout closed) is dropped, never the request."""
    fd = sys.stdout.fileno()

    def write(line: str) -> None:
        data = (line + "\n").encode("utf-8", "backslashreplace")
        try:
            while data:
                data = data[os.write(fd, data) :]
        except OSError:
            pass

    return write


class AccessLog:
    """WSGI middleware writing the combined-format line of each request (see above)."""

    _stamp: tuple[int, str] = (-1, "")

    def __init__(self, app: WSGIApp, write: Callable[[str], None] | None = None) -> None:
        self.app = app
        self._write = write or stdout_lines()

    def __call__(self, environ: dict, start_response: StartResponse) -> Iterable[bytes]:
        status: list[str] = []
        length: list[int] = []

        def starting(code: str, headers: list, exc_info: Any = None) -> Any:
            status[:] = [code.split(" ", 1)[0]]
            length[:] = [int(v) for k, v in headers if k.lower() == "content-length"]
            return start_response(code, headers, exc_info)

        body = _Counted(
            self.app(environ, starting),
            lambda sent: self.write(environ, status[0] if status else "-", sent),
        )
        if not (length and length[0] <= WHOLE_BODY_BYTES):
            return body
        # a small body as one list: the server writes it in one piece (granian takes a
        # list whole, and an iterator chunk by chunk through a channel)
        try:
            return list(body)
        except BaseException:
            body.sent = 0  # the list never reached the server: nothing was sent
            raise
        finally:
            body.close()

    def write(self, environ: dict, status: str, sent: int) -> None:
        request_line = (
            f"{environ.get('REQUEST_METHOD', '-')} {target(environ)} "
            f"{environ.get('SERVER_PROTOCOL', '-')}"
        )
        line = (
            f"{_quoted(environ.get('REMOTE_ADDR') or '-')} - {_quoted(_user(environ))} "
            f"{self._now()} "
            f'"{_quoted(request_line)}" {status} {sent or "-"} '
            f'"{_quoted(environ.get("HTTP_REFERER", "-"))}" '
            f'"{_quoted(environ.get("HTTP_USER_AGENT", "-"))}"'
        )
        self._write(mask_secrets(line))

    def _now(self) -> str:
        """`[04/Dec/2026:14:30:00 +0000]`, made again only when the second changes."""
        second = int(time.time())
        cached, text = self._stamp
        if cached != second:
            text = time.strftime("[%d/%b/%Y:%H:%M:%S %z]", time.localtime(second))
            self._stamp = (second, text)
        return text


class _Counted:
    """The app's body, counting the bytes sent; calls done(sent) once, when closed."""

    def __init__(self, body: Iterable[bytes], done: Callable[[int], None]) -> None:
        self._body, self.sent = body, 0
        self._done: Callable[[int], None] | None = done

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._body:
            self.sent += len(chunk)
            yield chunk

    def close(self) -> None:
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
        finally:
            done, self._done = self._done, None
            if done is not None:
                done(self.sent)
