"""Documents in their own formats: read into segments, rebuilt with the translations.

`parse_document` recognises a file's format from its name and content and returns its
segments (inline markup as codes, stapel/formats/inline.py) with what is needed to
rebuild it; `render_document` rebuilds it from the stored original and the targets.
One module per format (xliff, po, srt, html, docx), each with `extract` and `merge`,
which walk the document the same way, so the n-th target always lands in the n-th
segment. docs/formats.md describes every format's rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from types import ModuleType

from stapel.exceptions import TooLarge, ValidationError
from stapel.formats import docx, html, layout, po, pokeep, srt, xliff, xmlkeep
from stapel.formats.base import (
    FALSE_WORDS,
    OPTION_FIELDS,
    TRUE_WORDS,
    FormatError,
    Limits,
    Mark,
    Options,
    Source,
)
from stapel.formats.reading import head, whole
from stapel.storable import unstorable

__all__ = [
    "ACCEPTED",
    "OPTION_FIELDS",
    "Limits",
    "Mark",
    "Options",
    "ParsedDocument",
    "options_from_form",
    "parse_document",
    "render_document",
]

FORMATS: dict[str, ModuleType] = {
    "xliff": xliff,
    "po": po,
    "srt": srt,
    "html": html,
    "docx": docx,
}
EXTENSIONS = {
    ".txt": "txt",
    ".xlf": "xliff",
    ".xliff": "xliff",
    ".sdlxliff": "xliff",
    ".po": "po",
    ".pot": "po",
    ".srt": "srt",
    ".html": "html",
    ".htm": "html",
    ".docx": "docx",
}
ACCEPTED = ", ".join(EXTENSIONS)
MARKED = frozenset({"xliff", "po"})
"""The formats that carry each segment's score and review flag (docs/quality.md)."""
MEDIA_TYPES = {
    "txt": "text/plain; charset=utf-8",
    "xliff": "application/xliff+xml",
    "po": "text/x-gettext-translation",
    "srt": "application/x-subrip",
    "html": "text/html; charset=utf-8",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}


@dataclass
class ParsedDocument:
    """A document read into segments, with its original kept to rebuild it."""

    name: str
    format: str
    segments: list[str]
    original: bytes
    options: Options


def options_from_form(form) -> Options:
    """Read the document options of an upload's form fields ("true"/"false")."""
    values = {}
    for name in OPTION_FIELDS:
        raw = form.get(name)
        if raw is None:
            continue
        word = str(raw).strip().lower()
        if word not in TRUE_WORDS + FALSE_WORDS:
            raise ValidationError(f"{name} must be true or false", code="invalid_type")
        values[name] = word in TRUE_WORDS
    return Options.from_json(values)


def sniff(data: bytes) -> str | None:
    """Guess a format from the first bytes (None when nothing says)."""
    if data.startswith(b"PK\x03\x04"):
        return "docx"
    head = data[:4096].decode("utf-8", "ignore").lstrip("\ufeff \t\r\n")
    if head.startswith("<"):
        if re.search(r"<xliff\b", head):
            return "xliff"
        if re.search(r"<!doctype html|<html\b|<body\b|<p\b|<div\b", head, re.IGNORECASE):
            return "html"
        return "xml"
    if re.match(r"\d+\s*\r?\n\s*\d+:\d+:\d+[,.]\d+\s*-->", head):
        return "srt"
    if re.search(r'^\s*msgid\s+"', head, re.MULTILINE):
        return "po"
    return None


def detect(name: str, data: Source) -> str:
    """Return the format of a file from its name, checked against its content."""
    suffix = PurePosixPath(name.lower()).suffix
    sniffed = sniff(head(data, 4096))
    fmt = EXTENSIONS.get(suffix)
    if fmt is None and suffix in ("", ".xml") and sniffed in FORMATS:
        fmt = sniffed
    if fmt is None:
        raise ValidationError(
            f"file {name!r}: unknown format; accepted: {ACCEPTED}", code="unsupported_file_type"
        )
    mismatched = sniffed in FORMATS and sniffed != fmt
    if (
        mismatched
        or (sniffed == "xml" and fmt not in ("xliff", "html"))
        or (fmt == "docx" and sniffed != "docx")
    ):
        raise ValidationError(
            f"file {name!r}: its content is not {fmt} (it looks like {sniffed or 'text'}); "
            f"accepted: {ACCEPTED}",
            code="unsupported_file_type",
        )
    return fmt


def parse_document(
    name: str, data: Source, limits: Limits, options: Options | None = None
) -> ParsedDocument:
    """Read one uploaded document (any format but .txt) into its segments.

    A file is read from its start a piece at a time, and its bytes read whole only
    once it is accepted: a refused one is never held (docs/design/parsing.md).

    Raises ValidationError (400: the file's name, line and column for malformed
    content, the accepted formats for an unknown or mismatched one) or TooLarge (413:
    too many segments, a zip container over its bounds).
    """
    options = options or Options()
    fmt = detect(name, data)
    if fmt == "txt":
        raise ValueError("plain .txt files are read by the upload parser")
    try:
        segments = FORMATS[fmt].extract(data, options, limits)
    except FormatError as exc:
        raise _error(name, fmt, exc) from None
    if len(segments) > limits.max_segments:
        raise TooLarge(
            f"file {name!r} has {len(segments)} segments; the limit is {limits.max_segments}",
            code="too_many_segments",
        )
    for i, text in enumerate(segments):
        if len(text) > limits.max_segment_chars:
            raise ValidationError(
                f"file {name!r}: segment {i} has {len(text)} characters; the limit is "
                f"{limits.max_segment_chars}",
                code="segment_too_long",
            )
        found = unstorable(text)
        if found is not None:
            raise ValidationError(
                f"file {name!r}: segment {i} contains {found}; it cannot be stored",
                code="invalid_text",
            )
    return ParsedDocument(name, fmt, segments, whole(data), options)


def _error(name: str, fmt: str, exc: FormatError) -> ValidationError | TooLarge:
    message = f"file {name!r} ({fmt}){exc.where()}: {exc.message}"
    if exc.code == "unsupported_file_type":
        message += f"; accepted: {ACCEPTED}"
    if exc.code in ("document_too_large", "too_many_segments"):
        return TooLarge(message, code=exc.code)
    return ValidationError(message, code=exc.code)


def check_target(name: str, fmt: str, data: bytes, target: str) -> None:
    """Refuse a bilingual file that declares another target language than the job's
    (its targets would carry one language under another's label); regional variants
    of the job's language (de-AT for de) are the same language."""
    if fmt != "xliff":
        return
    for declared in sorted(xliff.target_languages(data)):
        if _primary(declared) != _primary(target):
            raise ValidationError(
                f"file {name!r} declares target language {declared!r}, but the job "
                f"translates into {target!r}: send the job for {declared!r}, or the file "
                f"with {target!r} as its target language",
                code="language_mismatch",
            )


def _primary(code: str) -> str:
    return re.split(r"[-_]", code.strip(), maxsplit=1)[0].lower()


def render_document(
    fmt: str,
    original: bytes,
    targets: list[str | None],
    options: Options,
    langs: tuple[str, str],
    limits: Limits | None = None,
    marks: list[Mark] | None = None,
) -> bytes:
    """Rebuild a stored document with its targets (None: not translated, left as it was).

    `marks`, one per segment, are written where the format has a place for them
    (MARKED). A text format keeps the original's BOM, declaration, line endings and
    final newline.
    """
    limits = limits or Limits()
    if fmt == "po":  # read and written entry by entry, the original's lines kept
        out = pokeep.rewrite(original, targets, options, langs, limits, marks)
    else:
        extra = {"marks": marks} if fmt in MARKED and marks is not None else {}
        out = FORMATS[fmt].merge(original, targets, options, langs, limits, **extra)
        if fmt == "xliff" and out != original:
            out = xmlkeep.restore(original, out)
    return out if fmt == "docx" else layout.keep(original, out)
