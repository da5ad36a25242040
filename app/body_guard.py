"""Request bodies read off the app's threads' hands: by a bounded pool, with a deadline,
a few at a time per client address.

granian hands a WSGI request to one of the process's app threads once its head has
arrived, and the app reads the body as the client sends it: a client that sends a
large body a byte at a time holds a thread for as long as it likes, and a few such
clients hold them all (the LibreTranslate dialect reads `api_key` from the body, so no
key is needed to do it). `BodyGuard` reads a request's body before the app sees it:
- in a pool of READERS threads of its own, into a file spooled to disk past SPOOL_BYTES,
  then hands the app the whole body;
- within a deadline of `STAPEL_BODY_DEADLINE_S` plus the announced length at
  `STAPEL_BODY_MIN_RATE` bytes a second: the app thread of a body not in by then is
  freed with a 408 (granian sends it once the body's read ends: a client still trickling
  its body sees it when it stops);
- at most `STAPEL_BODY_READS_PER_ADDRESS` at once from one client address (a read past
  its deadline still counts until it ends): one more waits SLOT_WAIT_S for a place,
  then is answered 429, unread. (A read takes its place before it starts: four reads
  blocked in granian's input at once, from threads of the pool, stalled a one-process
  server of four app threads altogether, bodyless requests included.)
A request the app will refuse for its length anyway (over STAPEL_MAX_BODY_BYTES) goes
straight to it (413, unread). The app thread waits for its own body only, and a client
address can keep at most that many threads waiting, each for a bounded time.
Requests without a body pass through untouched.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from tempfile import SpooledTemporaryFile
from typing import IO, Any

READERS = 32
"""Bodies read at once per web process (beyond that, 503)."""
SPOOL_BYTES = 1024 * 1024
"""A body up to this size is kept in memory, a longer one in a temporary file."""
READ_BYTES = 64 * 1024
SLOT_WAIT_S = 0.05
"""How long a body from an address at its cap waits for one of its reads to end."""

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict, StartResponse], Iterable[bytes]]


def _refuse(
    start_response: StartResponse, status: str, code: str, message: str, retry_s: int | None
) -> list[bytes]:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
        ("Connection", "close"),
    ]
    if retry_s is not None:
        headers.append(("Retry-After", str(retry_s)))
    start_response(status, headers)
    return [body]


def _read_all(stream: IO[bytes], length: int | None, limit: int) -> tuple[IO[bytes], int]:
    """Read a body (length bytes, or to its end when chunked, at most limit + 1)."""
    spool: IO[bytes] = SpooledTemporaryFile(max_size=SPOOL_BYTES)
    left = limit + 1 if length is None else length
    size = 0
    while left > 0:
        chunk = stream.read(min(READ_BYTES, left))
        if not chunk:
            break
        spool.write(chunk)
        size += len(chunk)
        left -= len(chunk)
    spool.seek(0)
    return spool, size


class BodyGuard:
    """WSGI middleware: read request bodies in a bounded pool, with a deadline."""

    def __init__(
        self,
        app: WSGIApp,
        *,
        max_body_bytes: int,
        deadline_s: float,
        min_rate: int,
        per_address: int,
        readers: int = READERS,
    ) -> None:
        self.app, self.max_body_bytes = app, max_body_bytes
        self.deadline_s, self.min_rate, self.per_address = deadline_s, max(1, min_rate), per_address
        self.readers = readers
        self._pool = ThreadPoolExecutor(readers, thread_name_prefix="body")
        self._reading: Counter[str] = Counter()
        self._freed = threading.Condition()

    def __call__(self, environ: dict, start_response: StartResponse) -> Iterable[bytes]:
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if (not length and not chunked) or length > self.max_body_bytes:
            return self.app(environ, start_response)
        address = environ.get("REMOTE_ADDR") or "-"
        refused = self._take(address)
        if refused is not None:
            return _refuse(start_response, *refused)
        future = self._pool.submit(
            _read_all, environ["wsgi.input"], None if chunked else length, self.max_body_bytes
        )
        future.add_done_callback(lambda _: self._give_back(address))
        deadline = self.deadline_s + (length or self.max_body_bytes) / self.min_rate
        try:
            body, size = future.result(timeout=deadline)
        except FutureTimeout:
            message = f"the request body did not arrive within {deadline:.0f} s"
            return _refuse(start_response, "408 Request Timeout", "body_timeout", message, None)
        environ["wsgi.input"] = body
        environ["CONTENT_LENGTH"] = str(size)
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        return self.app(environ, start_response)

    def _take(self, address: str) -> tuple[str, str, str, int] | None:
        """Count a read for address, or say why it is refused.

        An address at its cap waits up to SLOT_WAIT_S for one of its reads to end: a
        batch client's concurrent small bodies each take microseconds, a slow one holds
        its place.
        """
        with self._freed:
            has_room = lambda: self._reading[address] < self.per_address  # noqa: E731
            if not self._freed.wait_for(has_room, SLOT_WAIT_S):
                return (
                    "429 Too Many Requests",
                    "too_many_uploads",
                    f"at most {self.per_address} request bodies at once from one address",
                    1,
                )
            if sum(self._reading.values()) >= self.readers:
                return ("503 Service Unavailable", "busy", "too many bodies being read", 1)
            self._reading[address] += 1
        return None

    def _give_back(self, address: str) -> None:
        with self._freed:
            self._reading[address] -= 1
            if self._reading[address] <= 0:
                del self._reading[address]
            self._freed.notify_all()
