"""Markup inside a request's texts: LibreTranslate's `format=html`, DeepL's `tag_handling`.

A text with markup is read like a document of its kind (stapel.formats.htmlruns for
HTML, stapel.formats.xmlfragment for XML) into segments whose inline tags are markers
(stapel.formats.inline); the segments are translated like any others (the worker
places the markers by alignment, workers/markup.py), and `Fragment.rebuild` splices
the translations into the original text (stapel.formats.html.splice). Tags, attributes
(alt and title included) and ignored elements keep their bytes, and the result nests as
the source did. Whitespace inside an HTML run becomes single spaces (HTML's own rule);
an XML run keeps its line breaks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import stapel.formats.inline as inline
from stapel.formats import html, htmlruns, xmlfragment
from stapel.formats.base import FormatError, position

KINDS = ("html", "xml")


@dataclass(frozen=True)
class Markup:
    """How a request's texts carry markup: the kind and DeepL's tag options."""

    kind: str
    """"html" or "xml"."""
    ignore: frozenset[str] = frozenset()
    """Elements whose content is not translated (kept whole)."""
    splitting: frozenset[str] = frozenset()
    non_splitting: frozenset[str] = frozenset()
    outline: bool = True


@dataclass
class Fragment:
    """One text read into segments, with what rebuilding it needs."""

    text: str
    segments: list[str]
    units: list[htmlruns.Run] | None = field(default=None, repr=False)
    """None for plain text (its one segment is the text)."""

    @property
    def characters(self) -> int:
        """The characters outside the tags that are translated (as DeepL bills them)."""
        if self.units is None:
            return len(self.text)
        return sum(len(p.text) for run in self.units for p in run.pieces if p.kind == "text")

    def rebuild(self, targets: list[str]) -> str:
        """Return the text with the segments' translations (in order) in place."""
        if self.units is None:
            return targets[0] if targets else self.text
        return html.splice(self.text, self.units, targets, self.segments)


def parse(text: str, markup: Markup | None) -> Fragment:
    """Read a text; raise FormatError (line, column) for markup that is not well-formed."""
    if markup is None:
        return Fragment(text, [text])
    reserved = inline.ANY_MARK.search(text)
    if reserved is not None:
        line, column = position(text, reserved.start())
        raise FormatError(
            "the text holds a Unicode noncharacter U+FDD0..U+FDD3, reserved for Stapel's "
            "tag markers",
            line,
            column,
        )
    if markup.kind == "html":
        keep = frozenset(t.lower() for t in markup.ignore)
        # Attributes stay as sent (a document's alt and title are translated, not these).
        found = [u for u in htmlruns.units(text, keep) if isinstance(u, htmlruns.Run)]
        return Fragment(text, [html.segment(u) for u in found], found)
    rules = xmlfragment.Rules(markup.ignore, markup.splitting, markup.non_splitting, markup.outline)
    found = xmlfragment.units(text, rules)
    return Fragment(text, [xmlfragment.segment(u) for u in found], found)
