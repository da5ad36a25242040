"""HTML structure: the text runs between block boundaries and the attributes to translate.

Walks the tokenizer's events with a stack of open elements, refusing markup that does
not nest (stapel/formats/html.py describes the rules).
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from stapel.formats.base import FormatError
from stapel.formats.htmltokens import Event, events

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


@dataclass(slots=True)
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
    tag: str = ""


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
    """Finds the text runs and translatable attributes, checking that the markup nests.

    Linear in the events and streaming: each event is seen once (an element kept whole
    is skipped by counting its nested namesakes, not by looking ahead), a unit is
    yielded when it ends, and a code's number is a count kept for the run. An end tag
    looks down the stack only when an element of its name is open (`open` counts
    them); all it passes is then closed. docs/design/parsing.md has the figures.
    """

    def __init__(
        self, text: str | Iterable[str], keep: frozenset[str], max_codes: int | None = None
    ) -> None:
        self.text, self.keep, self.max_codes = text, keep, max_codes
        self.stack: list[Event] = []
        self.open: Counter[str] = Counter()
        self.units: list[Unit] = []
        self.run = Run()
        self.codes = 0
        self.opened: list[Piece] = []
        self.skipping: Event | None = None
        self.depth = 0

    def walk(self) -> Iterator[Unit]:
        for e in events(self.text):
            if self.skipping is not None:
                self._skip(e)
            else:
                self._event(e)
            yield from self.units
            self.units.clear()
        if self.skipping is not None:
            raise FormatError(
                f"<{self.skipping.tag}> is never closed", self.skipping.line, self.skipping.column
            )
        self._end_run()
        yield from self.units
        for e in self.stack:
            if e.tag in INLINE:
                raise FormatError(f"<{e.tag}> is never closed", e.line, e.column)

    def _event(self, e: Event) -> None:
        if e.kind in ("start", "startend"):
            self._start(e)
        elif e.kind == "end":
            self._end(e)
        elif e.kind == "text":
            self.run.pieces.append(Piece(e.start, e.end, html.unescape(e.raw)))
        elif e.kind == "comment":
            self._piece(e, e.end, "point")
        else:
            self._end_run()

    def _start(self, e: Event) -> None:
        if e.tag in self.keep or e.tag in SKIP or _atomic(e):
            if e.kind == "start" and e.tag not in VOID:
                self.skipping, self.depth = e, 0  # kept whole: _skip finds its end
            else:
                self._whole(e, e.end)
            return
        self._attributes(e)
        if e.tag in INLINE and e.kind == "start":
            self._push(e)
            self.opened.append(self._piece(e, e.end, "open"))
            self.opened[-1].tag = e.tag
        elif e.tag in POINTS or e.tag in INLINE:
            self._piece(e, e.end, "point").space = e.tag == "br"
        else:
            self._end_run()
            if e.kind == "start" and e.tag not in VOID:
                if e.tag in OPTIONAL_END and self.stack and self.stack[-1].tag == e.tag:
                    self._pop()
                self._push(e)

    def _skip(self, e: Event) -> None:
        """Inside an element kept whole: count its namesakes until its own end tag."""
        opener = self.skipping
        assert opener is not None
        if e.tag != opener.tag:
            return
        if e.kind == "start":
            self.depth += 1
        elif e.kind == "end" and self.depth:
            self.depth -= 1
        elif e.kind == "end":
            self.skipping = None
            self._whole(opener, e.end)

    def _whole(self, e: Event, end: int) -> None:
        """An element kept whole, from its start tag to `end`."""
        if e.tag in self.keep:
            self._piece(e, end, "point")
        elif e.tag in SKIP or e.tag not in INLINE | ATOMS | POINTS:
            self._end_run()
        else:
            self._piece(e, end, "point")

    def _push(self, e: Event) -> None:
        self.stack.append(e)
        self.open[e.tag] += 1

    def _pop(self) -> None:
        self.open[self.stack.pop().tag] -= 1

    def _end(self, e: Event) -> None:
        found = None
        if self.open[e.tag]:
            found = next(
                k for k in range(len(self.stack) - 1, -1, -1) if self.stack[k].tag == e.tag
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
        while len(self.stack) > found:
            self._pop()
        if e.tag not in INLINE:
            self._end_run()
            return
        if self.opened and self.opened[-1].tag == e.tag:
            opener = self.opened.pop()
            self.run.pieces.append(Piece(e.start, e.end, kind="close", number=opener.number))
        else:  # opened before a block ended the run: half a pair, placed as such
            self._piece(e, e.end, "close")

    def _piece(self, e: Event, end: int, kind: str) -> Piece:
        """A code from e's start to `end`."""
        self.codes += 1  # a close takes its opener's number: only new codes count
        if self.max_codes is not None and self.codes > self.max_codes:
            raise FormatError(
                f"a paragraph holds more than {self.max_codes} tags: its segment would pass "
                "the segment's character limit",
                e.line,
                e.column,
                code="segment_too_long",
            )
        piece = Piece(e.start, end, kind=kind, number=self.codes)
        self.run.pieces.append(piece)
        return piece

    def _attributes(self, e: Event) -> None:
        for name, value in e.attrs:
            if name in ATTRIBUTES and value and re.search(r"\w", value):
                self.units.append(Attr(e.start, e.end, name, value))

    def _end_run(self) -> None:
        run, self.run, self.opened, self.codes = self.run, Run(), [], 0
        if any(p.kind == "text" and re.search(r"\w", p.text) for p in run.pieces):
            self.units.append(run)


def units(text: str, keep: frozenset[str] = frozenset()) -> list[Unit]:
    """Return the text runs and attributes to translate, in document order.

    Elements named in keep (DeepL's `ignore_tags`) are standalone codes kept whole, in
    the run they stand in, whatever their kind.
    """
    return list(iter_units(text, keep))


def iter_units(
    text: str | Iterable[str], keep: frozenset[str] = frozenset(), max_chars: int | None = None
) -> Iterator[Unit]:
    """Yield what `units` returns, each unit as soon as it ends (a document is never
    held as a list of its events or units). With max_chars, a run with more codes than
    a segment of max_chars can hold (a marker is at least 3 characters) is refused as
    soon as it has them."""
    return _Walker(text, keep, None if max_chars is None else max_chars // 3).walk()
