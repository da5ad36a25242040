"""Response bodies read whole before their status where their size is bounded."""

from __future__ import annotations

from collections.abc import Iterator

from flask import stream_with_context

BUFFERED_ITEMS = 10_000
"""A body of up to this many items (a result's segments, a memory's units) is read whole
before its status is sent, so a database failure while reading it answers the API's 503,
and it goes out with a Content-Length. A longer one streams; a failure then breaks the
chunked body without its last chunk, which every HTTP client reports as an error."""


def whole_or_stream(items: int, parts: Iterator[str] | Iterator[bytes]) -> str | bytes | Iterator:
    """Return the whole body of up to BUFFERED_ITEMS items, else its stream."""
    if items > BUFFERED_ITEMS:
        return stream_with_context(parts)
    read = list(parts)
    if read and isinstance(read[0], bytes):
        return b"".join(read)  # type: ignore[arg-type]
    return "".join(read)  # type: ignore[arg-type]
