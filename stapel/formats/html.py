"""HTML: text translated in place; markup, attributes, scripts and styles kept byte for byte.

The file is read with the standard library's tokenizer, which reports where every tag
and text starts, and the translations are spliced into the original text, so whatever
Stapel does not translate stays exactly as it was. Text between block boundaries is one
segment; inline elements inside it (`<b>`, `<i>`, `<a href>`, `<span>` ...) are paired
codes, `<br>` and `<img>` standalone ones, and an element with `translate="no"`, class
`notranslate`, or `<code>`/`<kbd>`/`<samp>`/`<var>` is one standalone code kept whole.
`<script>`, `<style>`, `<template>`, `<textarea>`, `<svg>` and `<math>` are left alone.
The `alt` and `title` attributes are segments of their own. A segment whose translation
equals its text keeps its original bytes, so an identity round trip is byte for byte.

Malformed HTML is refused with its line and column: an end tag that closes nothing, an
end tag that would close an inline element still open inside it (`<b><i>x</b></i>`),
an inline element never closed, or a tag or comment cut off by the end of the file.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Sequence

import stapel.formats.inline as inline
from stapel.formats.base import FormatError, Limits, Options, Source, decode_utf8
from stapel.formats.htmlruns import Attr, Run, Unit, iter_units, units
from stapel.formats.reading import decode_pieces

SPACE = re.compile(r"\s+")


def segment(unit: Unit) -> str:
    """The unit's text as a segment: whitespace collapsed, codes as markers."""
    if isinstance(unit, Attr):
        return SPACE.sub(" ", unit.value).strip()
    parts = []
    for p in unit.pieces:
        if p.kind == "text":
            parts.append(SPACE.sub(" ", p.text))
        else:
            parts.append(inline.marker(p.kind, p.number) + (" " if p.space else ""))
    return SPACE.sub(" ", "".join(parts)).strip(" ")


def extract(data: Source, options: Options, limits: Limits) -> list[str]:
    """Return the segments of an HTML document, read as a stream as its bytes are
    decoded: a unit becomes its segment as it ends, the text before it is dropped, and
    reading stops once the segment limit is passed."""
    out: list[str] = []
    for unit in iter_units(decode_pieces(data), max_chars=limits.max_segment_chars):
        out.append(segment(unit))
        if len(out) > limits.max_segments:
            raise FormatError(
                f"more than {limits.max_segments} segments; that is the limit",
                code="too_many_segments",
            )
    return out


def _render(run: Run, target: str, text: str, tags: dict[int, str]) -> str:
    """The translation with its markers turned back into the run's original tags."""
    raws: dict[tuple[str, int], str] = {}
    for p in run.pieces:
        if p.kind != "text":
            raws[(p.kind, p.number)] = tags.get(p.start, text[p.start : p.end])
    out, at = [], 0
    for match in inline.MARKER.finditer(target):
        out.append(html.escape(inline.ANY_MARK.sub("", target[at : match.start()]), quote=False))
        out.append(raws.get((inline.KINDS[match.group(1)], int(match.group(2))), ""))
        at = match.end()
    out.append(html.escape(inline.ANY_MARK.sub("", target[at:]), quote=False))
    return "".join(out)


def _patched_tag(text: str, attr: Attr, value: str, tags: dict[int, str]) -> None:
    raw = tags.get(attr.tag_start, text[attr.tag_start : attr.tag_end])
    pattern = re.compile(rf"(\s{attr.name}\s*=\s*)(\"[^\"]*\"|'[^']*'|[^\s\"'>]+)", re.IGNORECASE)
    escaped = html.escape(value, quote=True)

    def quoted(m: re.Match) -> str:  # the value keeps its quote character
        mark = m.group(2)[0] if m.group(2)[0] in "\"'" else '"'
        return m.group(1) + mark + escaped + mark

    tags[attr.tag_start] = pattern.sub(quoted, raw, count=1)


def merge(
    data: bytes, targets: list[str | None], options: Options, langs: tuple[str, str], limits: Limits
) -> bytes:
    """Return the document with the translations spliced in."""
    bom = "\ufeff" if data.startswith(b"\xef\xbb\xbf") else ""
    text = decode_utf8(data)
    merged = splice(text, units(text), targets)
    return (bom + merged).encode() if merged != text else data


def splice(
    text: str,
    found: Sequence[Unit],
    targets: Sequence[str | None],
    sources: Sequence[str] | None = None,
) -> str:
    """Return text with each unit's translation in its place.

    A unit whose target equals its source segment (`sources`, default `segment`'s) keeps
    its bytes. stapel.formats.fragments splices a request's texts with it too.
    """
    tags: dict[int, str] = {}
    runs: list[tuple[Run, str]] = []
    for n, (unit, target) in enumerate(zip(found, targets, strict=False)):
        if target is None or target == (sources[n] if sources else segment(unit)):
            continue
        if isinstance(unit, Attr):
            _patched_tag(text, unit, inline.strip(target), tags)
        else:
            runs.append((unit, target))
    out: list[str] = []
    at = 0
    for start, end, new in sorted(_edits(text, runs, tags)):  # one pass: linear in text
        out += (text[at:start], new)
        at = end
    out.append(text[at:])
    return "".join(out)


def _edits(
    text: str, runs: list[tuple[Run, str]], tags: dict[int, str]
) -> list[tuple[int, int, str]]:
    """The splices: each translated run's trimmed span, and every changed tag outside one."""
    edits: list[tuple[int, int, str]] = []
    inside: set[int] = set()
    for run, target in runs:
        start, end = run.pieces[0].start, run.pieces[-1].end
        raw = text[start:end]
        start += len(raw) - len(raw.lstrip(" \t\n\r\f"))
        end -= len(raw) - len(raw.rstrip(" \t\n\r\f"))
        edits.append((start, end, _render(run, target, text, tags)))
        inside.update(p.start for p in run.pieces if p.kind != "text")
    for at, new in tags.items():
        if at not in inside:
            edits.append((at, at + _tag_length(text, at), new))
    return edits


def _tag_length(text: str, at: int) -> int:
    return len(next(_start_tags(text[at:]), text[at:]))


def _start_tags(text: str) -> Iterator[str]:
    match = re.match(r"<[^>]*>", text)
    if match:
        yield match.group(0)
