"""Uploads: a multipart body read one file at a time, each file parsed by its format.

`parse_upload` reads the stream with app.api.streams.MultipartReader; `parse_document`
is the one place where a file's format decides how it becomes segments (.txt: one
segment per line; XLIFF, PO, SRT, HTML and DOCX: stapel.formats). Document options
(`overwrite_targets`, `mark_fuzzy`) apply to the files that come after them in the body.
"""

from __future__ import annotations

import io
import json
from collections.abc import Collection
from typing import IO

from app.api.parsing import (
    FORM_FIELDS,
    MAX_NAME_CHARS,
    Limits,
    check_storable,
    check_text,
    finish_spec,
)
from app.api.streams import MultipartReader
from app.parse_slots import parse_slot
from stapel import formats
from stapel.exceptions import TooLarge, ValidationError
from stapel.formats import txt
from stapel.jobs import DocumentSpec, JobSpec


def parse_upload(
    stream: IO[bytes],
    boundary: bytes,
    pairs: Collection[str],
    limits: Limits,
    key: str | None,
) -> JobSpec:
    """Validate a multipart upload, one document per file, read one file at a time."""
    reader = MultipartReader(stream, boundary, allowed=FORM_FIELDS, max_files=limits.max_documents)
    documents: list[DocumentSpec] = []
    room = limits.max_segments
    for i, (filename, content) in enumerate(reader.documents()):
        options = formats.options_from_form(reader.fields)
        document = parse_document(i, filename, content, limits, room, options)
        room -= len(document.segments)
        documents.append(document)
    fields: dict = dict(reader.fields)
    if "metadata" in fields:
        try:
            fields["metadata"] = json.loads(fields["metadata"])
        except ValueError:
            raise ValidationError("metadata must be a JSON object", code="invalid_json") from None
    if not documents:
        raise ValidationError("upload at least one file", code="no_segments")
    return finish_spec(fields, documents, pairs, limits, key)


def parse_document(
    i: int,
    filename: str,
    content: IO[bytes],
    limits: Limits,
    room: int,
    options: formats.Options | None = None,
) -> DocumentSpec:
    """Parse one uploaded file into a document of at most `room` segments.

    The one place a file's format decides how it is read: `.txt` line by line here,
    every other accepted format by stapel.formats, from the file as it was spooled.
    """
    name = filename.replace("\\", "/").rsplit("/", 1)[-1][:MAX_NAME_CHARS] or f"file{i}"
    check_storable(name, f"file name {name!r}")
    if not name.lower().endswith(".txt"):  # XLIFF, PO, SRT, HTML, DOCX (stapel/formats)
        options = options or formats.Options()
        bounds = formats.Limits(limits.max_segment_chars, min(limits.max_segments, room))
        size = content.seek(0, io.SEEK_END)
        with parse_slot(size):  # read from its file: held whole only once accepted
            doc = formats.parse_document(name, content, bounds, options)
        return DocumentSpec(name, doc.segments, doc.format, doc.original, options.as_json())
    layout = txt.Layout()
    lines = _txt_lines(name, content, limits, room, layout)
    return DocumentSpec(name, lines, "txt", layout.to_bytes())


def _txt_lines(
    name: str, content: IO[bytes], limits: Limits, room: int, layout: txt.Layout
) -> list[str]:
    """One segment per line (CRLF or LF; empty lines kept), read line by line; each
    line's ending and the BOM go to layout, to rebuild the file as it was.

    A line is read with a byte bound: n bytes are at least n/4 characters, so a line
    that reaches the bound without its newline is too long, and is never read whole.
    """
    bound = 4 * limits.max_segment_chars + 2
    where = f"file {name!r}"
    lines: list[str] = []
    offset = 0
    while raw := content.readline(bound):
        if len(raw) == bound and not raw.endswith(b"\n"):
            raise ValidationError(
                f"{where} line {len(lines) + 1} is longer than {limits.max_segment_chars} "
                "characters",
                code="segment_too_long",
            )
        end = txt.ending(raw)
        line = raw[: len(raw) - len(end)]
        layout.add(end)
        layout.bom = layout.bom or (offset == 0 and raw.startswith(b"\xef\xbb\xbf"))
        try:
            text = line.decode("utf-8-sig" if offset == 0 else "utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(
                f"{where} is not UTF-8 (bad byte at offset {offset + exc.start})",
                code="invalid_encoding",
            ) from None
        offset += len(raw)
        if len(lines) >= room:
            raise TooLarge(
                f"the job has more than {limits.max_segments} segments; that is the limit",
                code="too_many_segments",
            )
        lines.append(check_text(text, f"{where} line {len(lines) + 1}", limits))
    return lines
