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
from collections.abc import Iterator
from dataclasses import dataclass, field

import stapel.formats.inline as inline
from stapel.formats.base import FormatError, Limits, Options, decode_utf8
from stapel.formats.htmltokens import Event, tokenize

INLINE = {
    "a",
    "abbr",
    "b",
    "bdi",
    "bdo",
    "big",
    "cite",
    "data",
    "del",
    "dfn",
    "em",
    "font",
    "i",
    "ins",
    "label",
    "mark",
    "q",
    "s",
    "small",
    "span",
    "strike",
    "strong",
    "sub",
    "sup",
    "time",
    "tt",
    "u",
}
VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "param",
    "source",
    "track",
    "wbr",
}
POINTS = {"br", "img", "wbr"}
ATOMS = {"code", "kbd", "samp", "var"}
SKIP = {"script", "style", "template", "textarea", "svg", "math"}
OPTIONAL_END = {
    "p",
    "li",
    "dt",
    "dd",
    "option",
    "optgroup",
    "tr",
    "td",
    "th",
    "thead",
    "tbody",
    "tfoot",
    "colgroup",
    "caption",
    "rb",
    "rt",
    "rp",
    "html",
    "head",
    "body",
}
ATTRIBUTES = ("alt", "title")
SPACE = re.compile(r"\s+")


@dataclass
class Piece:
    """One part of a text run: text (decoded) or a code (its original bytes)."""

    start: int
    end: int
    text: str = ""
    kind: str = "text"
    """"text", "open", "close" or "point"."""
    number: int = 0
    space: bool = False
    """A `<br>`: the words either side are two words to the model."""


@dataclass
class Run:
    pieces: list[Piece] = field(default_factory=list)


@dataclass
class Attr:
    """An alt or title attribute value: where its tag is and which attribute."""

    tag_start: int
    tag_end: int
    name: str
    value: str


Unit = Run | Attr


def _atomic(e: Event) -> bool:
    attrs = dict(e.attrs)
    classes = (attrs.get("class") or "").split()
    return e.tag in ATOMS or attrs.get("translate") == "no" or "notranslate" in classes


class _Walker:
    """Finds the text runs and translatable attributes, checking that the markup nests."""

    def __init__(self, text: str, events: list[Event]) -> None:
        self.text, self.events = text, events
        self.stack: list[Event] = []
        self.units: list[Unit] = []
        self.run = Run()
        self.opened: list[Piece] = []

    def walk(self) -> list[Unit]:
        i = 0
        while i < len(self.events):
            i = self._event(i, self.events[i])
        self._end_run()
        for e in self.stack:
            if e.tag in INLINE:
                raise FormatError(f"<{e.tag}> is never closed", e.line, e.column)
        return self.units

    def _event(self, i: int, e: Event) -> int:
        if e.kind in ("start", "startend"):
            return self._start(i, e)
        if e.kind == "end":
            self._end(e)
        elif e.kind == "text":
            raw = self.text[e.start : e.end]
            self.run.pieces.append(Piece(e.start, e.end, html.unescape(raw)))
        elif e.kind == "comment":
            self._piece(e.start, e.end, "point")
        else:
            self._end_run()
        return i + 1

    def _start(self, i: int, e: Event) -> int:
        if e.tag in SKIP or _atomic(e):
            j = self._matching_end(i, e) if e.kind == "start" and e.tag not in VOID else i
            end = self.events[j].end if j < len(self.events) else len(self.text)
            if e.tag in SKIP or e.tag not in INLINE | ATOMS | POINTS:
                self._end_run()
            else:
                self._piece(e.start, end, "point")
            return j + 1
        self._attributes(e)
        if e.tag in INLINE and e.kind == "start":
            self.stack.append(e)
            self.opened.append(self._piece(e.start, e.end, "open"))
        elif e.tag in POINTS or e.tag in INLINE:
            self._piece(e.start, e.end, "point").space = e.tag == "br"
        else:
            self._end_run()
            if e.kind == "start" and e.tag not in VOID:
                if e.tag in OPTIONAL_END and self.stack and self.stack[-1].tag == e.tag:
                    self.stack.pop()
                self.stack.append(e)
        return i + 1

    def _matching_end(self, i: int, e: Event) -> int:
        depth = 0
        for j in range(i + 1, len(self.events)):
            other = self.events[j]
            if other.tag == e.tag and other.kind == "start":
                depth += 1
            elif other.tag == e.tag and other.kind == "end":
                if depth == 0:
                    return j
                depth -= 1
        raise FormatError(f"<{e.tag}> is never closed", e.line, e.column)

    def _end(self, e: Event) -> None:
        found = next(
            (k for k in range(len(self.stack) - 1, -1, -1) if self.stack[k].tag == e.tag), None
        )
        if found is None:
            if e.tag in OPTIONAL_END or e.tag in VOID:
                self._end_run()
                return
            raise FormatError(f"</{e.tag}> closes nothing (no <{e.tag}> is open)", e.line, e.column)
        for inner in self.stack[found + 1 :]:
            if inner.tag in INLINE:
                raise FormatError(
                    f"</{e.tag}> closes <{inner.tag}> (line {inner.line}, column "
                    f"{inner.column}), which is still open",
                    e.line,
                    e.column,
                )
        del self.stack[found:]
        if e.tag not in INLINE:
            self._end_run()
            return
        if self.opened and self.text[self.opened[-1].start + 1 :].lower().startswith(e.tag):
            opener = self.opened.pop()
            self.run.pieces.append(Piece(e.start, e.end, kind="close", number=opener.number))
        else:
            self._piece(e.start, e.end, "point")

    def _piece(self, start: int, end: int, kind: str) -> Piece:
        numbers = [p.number for p in self.run.pieces if p.kind in ("open", "point")]
        piece = Piece(start, end, kind=kind, number=max(numbers, default=0) + 1)
        self.run.pieces.append(piece)
        return piece

    def _attributes(self, e: Event) -> None:
        for name, value in e.attrs:
            if name in ATTRIBUTES and value and re.search(r"\w", value):
                self.units.append(Attr(e.start, e.end, name, value))

    def _end_run(self) -> None:
        run, self.run, self.opened = self.run, Run(), []
        if any(p.kind == "text" and re.search(r"\w", p.text) for p in run.pieces):
            self.units.append(run)


def units(text: str) -> list[Unit]:
    """Return the text runs and attributes to translate, in document order."""
    return _Walker(text, tokenize(text)).walk()


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


def extract(data: bytes, options: Options, limits: Limits) -> list[str]:
    """Return the segments of an HTML document."""
    return [segment(u) for u in units(decode_utf8(data))]


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
    quoted = '"' + html.escape(value, quote=True) + '"'
    tags[attr.tag_start] = pattern.sub(lambda m: m.group(1) + quoted, raw, count=1)


def merge(
    data: bytes, targets: list[str | None], options: Options, langs: tuple[str, str], limits: Limits
) -> bytes:
    """Return the document with the translations spliced in."""
    bom = "\ufeff" if data.startswith(b"\xef\xbb\xbf") else ""
    text = decode_utf8(data)
    found = units(text)
    tags: dict[int, str] = {}
    runs: list[tuple[Run, str]] = []
    for unit, target in zip(found, targets, strict=False):
        if target is None or target == segment(unit):
            continue
        if isinstance(unit, Attr):
            _patched_tag(text, unit, inline.strip(target), tags)
        else:
            runs.append((unit, target))
    edits = _edits(text, runs, tags)
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return (bom + text).encode() if edits else data


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
