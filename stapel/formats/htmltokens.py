"""The HTML tokenizer: the standard library's, with each event's offsets in the text."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from stapel.formats.base import FormatError


@dataclass
class Event:
    kind: str
    """"start", "end", "startend", "text", "comment" or "other"."""
    start: int
    end: int
    tag: str = ""
    attrs: list[tuple[str, str | None]] = field(default_factory=list)
    line: int = 0
    column: int = 0


class _Tokens(HTMLParser):
    """Collects events with their offsets in the text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=False)
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.events: list[Event] = []

    def _add(self, kind: str, tag: str = "", attrs=None) -> None:
        line, column = self.getpos()
        self.events.append(
            Event(kind, self.starts[line - 1] + column, -1, tag, attrs or [], line, column + 1)
        )

    def handle_starttag(self, tag, attrs):
        self._add("start", tag, attrs)

    def handle_startendtag(self, tag, attrs):
        self._add("startend", tag, attrs)

    def handle_endtag(self, tag):
        self._add("end", tag)

    def handle_data(self, data):
        self._add("text")

    def handle_entityref(self, name):
        self._add("text")

    def handle_charref(self, name):
        self._add("text")

    def handle_comment(self, data):
        self._add("comment")

    def handle_decl(self, decl):
        self._add("other")

    def handle_pi(self, data):
        self._add("other")

    def unknown_decl(self, data):
        self._add("other")


def tokenize(text: str) -> list[Event]:
    """Return the events of text, each with its [start, end) offsets."""
    tokens = _Tokens(text)
    try:
        tokens.feed(text)
    except AssertionError as exc:  # html.parser asserts on `<![` that opens no section
        line, column = tokens.getpos()
        raise FormatError(f"a declaration is not well-formed ({exc})", line, column + 1) from None
    if "<" in tokens.rawdata:  # a tag or comment the end of the file cut off
        at = len(text) - len(tokens.rawdata) + tokens.rawdata.index("<")
        line = text.count("\n", 0, at) + 1
        raise FormatError("a tag or comment is not closed", line, at - text.rfind("\n", 0, at))
    tokens.close()
    events = tokens.events
    for this, after in itertools.pairwise(events):
        this.end = after.start
    if events:
        events[-1].end = len(text)
    return events
