"""Request bodies read as streams, stopping at the first limit crossed.

A job body is never held whole in the web process: a JSON body is parsed event by event
(ijson), counting segments and nesting as it goes; a multipart upload is decoded by
werkzeug's streaming decoder into one document at a time, each spooled to a temporary
file (in memory while small) and handed to its parser before the next is read. What a
request costs in memory is about what it holds as Python strings, and a request that
breaks a limit is refused before the rest of it is read.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from typing import IO, Any

import ijson
from werkzeug.sansio.multipart import Data, Epilogue, Field, File, MultipartDecoder, NeedData

from stapel.exceptions import TooLarge, ValidationError

MAX_JSON_DEPTH = 32
"""Nesting deeper than this is refused (400): job bodies need 4 levels, metadata a few."""
READ_BYTES = 64 * 1024
SPOOL_BYTES = 1024 * 1024
"""An uploaded document stays in memory up to this size, then moves to a temporary file."""
MAX_FIELD_BYTES = 64 * 1024
"""A form field (not a file) longer than this is refused: none needs more."""
SEGMENT_PATHS = (["segments", "item"], ["documents", "item", "segments", "item"])
_SURROGATE = re.compile(
    rb"(\\+)u[dD]([89a-fA-F])[0-9a-fA-F]{2}(?:(\\+)u[dD]([c-fC-F])[0-9a-fA-F]{2})?"
)
"""A \\uD800-\\uDFFF escape, with the low half that may follow a high one."""
_ESCAPE_BYTES = 12


class _Counted:
    """A stream that refuses to go on when no JSON token ended for too many bytes.

    ijson hands over a string only once it is complete, so a 60 MiB string would be
    built whole before any check could see it; this bound stops it at the reader. It
    also refuses unpaired surrogate escapes (`"\\ud800"`), which ijson's C parser would
    turn into "?" instead of an error.
    """

    def __init__(self, stream: IO[bytes], max_token_bytes: int) -> None:
        self.stream, self.max_token_bytes = stream, max_token_bytes
        self.read_total = 0
        self.mark = 0
        self._tail = b""

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # ijson asks for nothing first, to learn bytes from text
            return b""
        if self.read_total - self.mark > self.max_token_bytes:
            raise ValidationError(
                f"the body has a JSON value longer than {self.max_token_bytes} bytes",
                code="segment_too_long",
            )
        data = self.stream.read(size if size and size > 0 else READ_BYTES)
        self.read_total += len(data)
        self._check_surrogates(data)
        return data

    def _check_surrogates(self, data: bytes) -> None:
        """Scan for escapes; an escape that may go on in the next read waits for it."""
        buf, final = self._tail + data, not data
        if b"\\" not in buf:
            self._tail = b""
            return
        cut = len(buf) if final else max(len(buf) - _ESCAPE_BYTES, 0)
        while cut > 0 and buf[cut - 1] == 0x5C:  # never cut a run of backslashes
            cut -= 1
        for match in _SURROGATE.finditer(buf, 0, len(buf)):
            if match.end() > cut and not final:
                cut = match.start()
                break
            if len(match.group(1)) % 2 == 0:
                continue  # an escaped backslash followed by text, not an escape
            high = match.group(2) in b"89abAB"
            paired = match.group(3) is not None and len(match.group(3)) % 2 == 1
            if not (high and paired):
                raise ValidationError(
                    "the body has an unpaired surrogate escape: not valid Unicode text",
                    code="invalid_text",
                )
        self._tail = buf[cut:]


def read_json(stream: IO[bytes], *, max_segments: int, max_segment_chars: int, max_documents: int):
    """Parse a JSON body from stream; raise at the first limit crossed, before reading on.

    ijson's basic events carry no path (its prefixed events cost a string per event as
    long as the nesting, quadratic in the depth), so the path is kept here.
    """
    counted = _Counted(stream, 12 * max_segment_chars + MAX_FIELD_BYTES)
    builder = ijson.ObjectBuilder()
    path: list[str] = []
    segments = documents = others = 0
    # Besides segments, a body holds a few events per document, its fields and metadata of
    # a few KiB: one with more than that is refused before it is all built.
    most_others = 8 * max_documents + MAX_FIELD_BYTES
    try:
        for event, value in ijson.basic_parse(counted, use_float=True):
            counted.mark = counted.read_total
            if event != "string" or path not in SEGMENT_PATHS:
                others += 1
                if others > most_others:
                    raise ValidationError(
                        "the body holds more values than a job request can", code="invalid_request"
                    )
            if event in ("start_map", "start_array"):
                if len(path) >= MAX_JSON_DEPTH:
                    raise ValidationError(
                        f"the JSON body is nested deeper than {MAX_JSON_DEPTH} levels",
                        code="invalid_json",
                    )
                if event == "start_map" and path == ["documents", "item"]:
                    documents += 1
                    if documents > max_documents:
                        raise TooLarge(
                            f"more than {max_documents} documents; that is the limit per job",
                            code="too_many_documents",
                        )
                path.append("" if event == "start_map" else "item")
            elif event == "map_key":
                path[-1] = value
            elif event in ("end_map", "end_array"):
                path.pop()
            elif event == "string" and path in SEGMENT_PATHS:
                segments += 1
                _check_segment(value, segments, max_segments, max_segment_chars)
            builder.event(event, value)
    except ijson.JSONError:
        raise ValidationError("the body is not valid JSON", code="invalid_json") from None
    except UnicodeDecodeError:  # a lone low surrogate escape, decoded by the C parser
        raise ValidationError("the body is not valid Unicode text", code="invalid_text") from None
    return builder.value


def _check_segment(value: str, n: int, max_segments: int, max_chars: int) -> None:
    if n > max_segments:
        raise TooLarge(
            f"more than {max_segments} segments; that is the limit per job",
            code="too_many_segments",
        )
    if len(value) > max_chars:
        raise ValidationError(
            f"segment {n} has {len(value)} characters; the limit is {max_chars}",
            code="segment_too_long",
        )


class MultipartReader:
    """Read a multipart/form-data body: form fields into `fields`, files one at a time.

    Iterate `documents()` for (file name, content) pairs; each content is a readable
    binary file, valid until the next document is asked for. `fields` is complete once
    the iteration ends (clients may send fields after the files).
    """

    def __init__(self, stream: IO[bytes], boundary: bytes, *, allowed: set[str], max_files: int):
        self.stream, self.allowed, self.max_files = stream, allowed, max_files
        self.decoder = MultipartDecoder(boundary, max_form_memory_size=None)
        self.fields: dict[str, str] = {}
        self.files = 0

    def documents(self) -> Iterator[tuple[str, IO[bytes]]]:
        """Yield each uploaded file as (its name, its content rewound), in order."""
        part: Field | File | None = None
        sink: Any = None
        for event in self._events():
            if isinstance(event, Field):
                part, sink = self._field(event), bytearray()
            elif isinstance(event, File):
                part, sink = self._file(event), tempfile.SpooledTemporaryFile(SPOOL_BYTES)
            elif isinstance(event, Data) and part is not None:
                if isinstance(part, Field):
                    sink.extend(event.data)
                    if len(sink) > MAX_FIELD_BYTES:
                        raise ValidationError(
                            f"form field {part.name!r} is longer than {MAX_FIELD_BYTES} bytes",
                            code="invalid_request",
                        )
                else:
                    sink.write(event.data)
                if event.more_data:
                    continue
                if isinstance(part, Field):
                    self.fields[part.name] = sink.decode("utf-8", "replace")
                else:
                    sink.seek(0)
                    try:
                        yield part.filename or "", sink
                    finally:  # also when the caller stops at a limit
                        sink.close()
                part = None

    def _field(self, event: Field) -> Field:
        if event.name not in self.allowed:
            raise ValidationError(
                f"unknown form fields: {[event.name]}; send files as 'files'",
                code="unknown_field",
            )
        return event

    def _file(self, event: File) -> File:
        self.files += 1
        if self.files > self.max_files:
            raise TooLarge(
                f"more than {self.max_files} files; that is the limit per job",
                code="too_many_documents",
            )
        return event

    def _events(self) -> Iterator[Field | File | Data]:
        while True:
            data = self.stream.read(READ_BYTES)
            self.decoder.receive_data(data or None)
            while True:
                try:
                    event = self.decoder.next_event()
                except ValueError:
                    raise ValidationError(
                        "the multipart body is malformed", code="invalid_request"
                    ) from None
                if isinstance(event, NeedData):
                    break
                if isinstance(event, Epilogue):
                    return
                if isinstance(event, (Field, File, Data)):
                    yield event
            if not data:
                raise ValidationError("the multipart body ends too early", code="invalid_request")
