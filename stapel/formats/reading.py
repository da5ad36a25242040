"""A document read a piece at a time, from memory or from the file it was spooled to:
its bytes, its text decoded as it is read, and its lines (docs/design/parsing.md)."""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator

from stapel.formats.base import FormatError, Source

PIECE = 1 << 16
"""Bytes read and decoded at a time: a document's text is never held whole while it is read."""
BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
"""Where str.splitlines breaks a line."""


def read_pieces(source: Source, size: int = PIECE) -> Iterator[bytes]:
    """Yield a document's bytes a piece at a time, from its start."""
    if isinstance(source, bytes):
        yield from (source[at : at + size] for at in range(0, len(source), size))
        return
    source.seek(0)
    while piece := source.read(size):
        yield piece


def head(source: Source, size: int) -> bytes:
    """A document's first bytes."""
    return next(read_pieces(source, size), b"")


def whole(source: Source) -> bytes:
    """A document's bytes (read once it is accepted: they are stored)."""
    if isinstance(source, bytes):
        return source
    source.seek(0)
    return source.read()


def decode_pieces(source: Source, encoding: str = "utf-8-sig") -> Iterator[str]:
    """Yield a document's text a piece at a time (a BOM dropped with utf-8-sig); a byte
    the encoding cannot read is a FormatError with its line and column."""
    decoder = codecs.getincrementaldecoder(encoding)()
    done = 0

    def decoded(piece: bytes, final: bool) -> str:
        try:
            return decoder.decode(piece, final)
        except UnicodeDecodeError as exc:
            bad = done + len(piece) - len(exc.object) + exc.start
            name = "UTF-8" if encoding.startswith("utf-8") else encoding
            raise FormatError(
                f"not {name} (bad byte at offset {bad})",
                *_place(source, bad),
                code="invalid_encoding",
            ) from None

    for piece in read_pieces(source):
        if text := decoded(piece, False):
            yield text
        done += len(piece)
    if text := decoded(b"", True):
        yield text


def _place(source: Source, offset: int) -> tuple[int, int]:
    """The 1-based (line, column) of a byte offset, read a piece at a time."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    line, column, at = 1, 1, 0
    for piece in read_pieces(source):
        piece = piece[: offset - at]
        text = decoder.decode(piece)
        if newlines := text.count("\n"):
            line, column = line + newlines, len(text) - text.rfind("\n")
        else:
            column += len(text)
        at += len(piece)
        if at >= offset:
            break
    return line, column


def iter_lines(pieces: Iterable[str], max_chars: int) -> Iterator[str]:
    """Yield the lines of text given in pieces, as str.splitlines(keepends=True) gives
    them; a line longer than max_chars is refused before it is held whole."""
    held: list[str] = []  # the start of a line that goes on in the next piece
    size, line = 0, 1
    for piece in pieces:
        at = 0
        if held and held[-1].endswith("\r"):  # a line break, unless a \n follows it
            at = 1 if piece.startswith("\n") else 0
            yield "".join(held) + piece[:at]
            held, size, line = [], 0, line + 1
        for match in BREAK.finditer(piece, at):
            end = match.end()
            if end == len(piece) and match.group() == "\r":
                break  # perhaps the first half of a \r\n the pieces cut
            if size + end - at > max_chars:
                break
            yield "".join(held) + piece[at:end] if held else piece[at:end]
            held, size, line, at = [], 0, line + 1, end
        if at < len(piece):
            held.append(piece[at:])
            size += len(piece) - at
        if size > max_chars:
            raise FormatError(
                f"a line is longer than {max_chars} characters; that is the limit", line
            )
    if held:
        yield "".join(held)
