"""SRT subtitles: each cue's text translated as one sentence, everything else byte for byte.

A cue is a number line, a timing line (`00:00:01,000 --> 00:00:02,500`, positions
after it allowed) and text lines up to a blank line. The text lines are joined with
spaces into one segment (a sentence broken over two lines is one sentence) and the
translation is broken again into as many lines, at spaces, as evenly as it goes.
Numbers, timings, blank lines, line endings and a BOM stay exactly as they were. The
tags SRT players know (`<i>`, `<b>`, `<u>`, `<font ...>`) are paired codes and `{\\an8}`
style overrides standalone codes. A cue whose translation equals its text keeps its
original lines, so an identity round trip gives the file back byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import stapel.formats.inline as inline
from stapel.formats.base import FormatError, Limits, Options, Source, decode_utf8
from stapel.formats.reading import decode_pieces, iter_lines

TIMING = re.compile(
    r"^\s*\d{1,3}:\d{1,2}:\d{1,2}[,.]\d{1,3}\s*-->\s*\d{1,3}:\d{1,2}:\d{1,2}[,.]\d{1,3}"
)
TAG = re.compile(r"</?(?:i|b|u|font)\b[^>]*>|\{\\[^}]*\}", re.IGNORECASE)


@dataclass
class Cue:
    """A cue's text lines: where they are in the file and what they say."""

    first: int
    """Index of the first text line in the file's lines."""
    lines: list[str]
    ends: list[str]
    """Each line's ending ("\\n", "\\r\\n" or "" at the end of the file)."""


def _pairs(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Each line without its ending, and the ending ("\n", "\r\n" or "")."""
    for raw in lines:
        line = raw.rstrip("\r\n")
        yield line, raw[len(line) :]


def _lines(data: bytes) -> tuple[str, list[str], list[str]]:
    bom = "\ufeff" if data.startswith(b"\xef\xbb\xbf") else ""
    pairs = list(_pairs(decode_utf8(data).splitlines(keepends=True)))
    return bom, [line for line, _ in pairs], [end for _, end in pairs]


def cues(pairs: Iterable[tuple[str, str]], limit: int | None = None) -> Iterator[Cue]:
    """Yield the cues of (line, ending) pairs as they are read; a block without a timing
    line is a FormatError with its line, and reading stops past `limit` cues."""
    lines = enumerate(pairs)
    count = 0
    for i, (line, _end) in lines:
        if not line.strip():
            continue
        if not line.strip().isdigit():
            raise FormatError("expected a cue number", i + 1, 1)
        timing = next(lines, None)
        if timing is None or not TIMING.match(timing[1][0]):
            raise FormatError("expected a timing line like 00:00:01,000 --> 00:00:02,000", i + 2, 1)
        cue = Cue(i + 2, [], [])
        for _j, (text, end) in lines:
            if not text.strip():
                break  # the blank line that ends the cue
            cue.lines.append(text)
            cue.ends.append(end)
        count += 1
        if limit is not None and count > limit:
            raise FormatError(
                f"more than {limit} cues; that is the limit", i + 1, code="too_many_segments"
            )
        yield cue


def encode(lines: list[str]) -> tuple[str, list[str]]:
    """Join a cue's lines into one segment with its tags as codes; return the tags too."""
    tags: list[str] = []
    opened: list[int] = []

    def code(match: re.Match) -> str:
        tag = match.group(0)
        tags.append(tag)
        n = len(tags)
        if tag.startswith("{"):
            return inline.marker("point", n)
        if tag.startswith("</"):
            return inline.marker("close", opened.pop()) if opened else inline.marker("point", n)
        opened.append(n)
        return inline.marker("open", n)

    return TAG.sub(code, " ".join(line.strip() for line in lines)), tags


def decode(text: str, tags: list[str]) -> str:
    """Turn codes back into the cue's tags (a close marker into the matching end tag)."""
    closers = _closers(tags)

    def back(match: re.Match) -> str:
        kind, n = inline.KINDS[match.group(1)], int(match.group(2))
        if kind == "close":
            return closers.get(n, "")
        return tags[n - 1] if 0 < n <= len(tags) else ""

    return inline.ANY_MARK.sub("", inline.MARKER.sub(back, text))


def _closers(tags: list[str]) -> dict[int, str]:
    out: dict[int, str] = {}
    opened: list[int] = []
    for n, tag in enumerate(tags, 1):
        if tag.startswith("{"):
            continue
        if tag.startswith("</"):
            if opened:
                out[opened.pop()] = tag
        else:
            opened.append(n)
    return out


def rebreak(text: str, count: int) -> list[str]:
    """Break text at spaces into count lines of about equal length (never inside a tag).

    Fewer lines when there are fewer words: an empty line would end the cue.
    """
    words = text.split(" ")
    count = max(1, min(count, len(words)))
    visible = [len(TAG.sub("", w)) for w in words]
    goal = (sum(visible) + len(words) - 1) / count
    lines: list[str] = []
    current: list[str] = []
    width = 0
    for i, word in enumerate(words):
        must = len(words) - i <= count - len(lines) - 1  # one word left per line to come
        full = width + visible[i] / 2 > goal * (len(lines) + 1)
        if current and len(lines) < count - 1 and (full or must):
            lines.append(" ".join(current))
            current = []
        current.append(word)
        width += visible[i] + 1
    lines.append(" ".join(current))
    return lines


def extract(data: Source, options: Options, limits: Limits) -> list[str]:
    """Return each cue's text as one segment, read as the bytes are decoded: the file's
    text is never held whole, and reading stops past the segment limit."""
    lines = iter_lines(decode_pieces(data), limits.max_line_chars)
    return [encode(cue.lines)[0] for cue in cues(_pairs(lines), limits.max_segments)]


def merge(
    data: bytes, targets: list[str | None], options: Options, langs: tuple[str, str], limits: Limits
) -> bytes:
    """Return the file with each translated cue's lines replaced, re-broken to its count."""
    bom, lines, ends = _lines(data)
    found = list(zip(cues(zip(lines, ends, strict=True)), targets, strict=False))
    for cue, target in reversed(found):  # from the end: earlier line numbers stay valid
        segment, tags = encode(cue.lines)
        if target is None or target == segment:
            continue
        broken = rebreak(decode(target, tags), len(cue.lines))
        span = slice(cue.first, cue.first + len(cue.lines))
        lines[span] = broken
        ends[span] = [cue.ends[0]] * (len(broken) - 1) + [cue.ends[-1]]
    return (bom + "".join(line + end for line, end in zip(lines, ends, strict=True))).encode()
