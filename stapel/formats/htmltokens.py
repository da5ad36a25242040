"""The HTML tokenizer: the standard library's, with each event's offsets in the text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

from stapel.formats.base import FormatError

NEWLINE = re.compile("\n")
CHUNK = 1 << 13
"""Characters fed to the parser at a time: events come out as the text is read."""


@dataclass(slots=True)
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
        self.starts = [0]
        """Where each line read so far starts (grown chunk by chunk)."""
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


def events(text: str) -> Iterator[Event]:
    """Yield the events of text in order, each with its [start, end) offsets, as the text
    is read: an event is yielded once the next one starts (that is where it ends)."""
    tokens = _Tokens(text)
    held: Event | None = None
    for at in range(0, len(text), CHUNK):
        chunk = text[at : at + CHUNK]
        tokens.starts.extend(m.end() + at for m in NEWLINE.finditer(chunk))
        try:
            tokens.feed(chunk)
        except AssertionError as exc:  # html.parser asserts on `<![` that opens no section
            line, column = tokens.getpos()
            raise FormatError(
                f"a declaration is not well-formed ({exc})", line, column + 1
            ) from None
        found, tokens.events = tokens.events, []
        for event in found:
            if held is not None:
                held.end = event.start
                yield held
            held = event
    if "<" in tokens.rawdata:  # a tag or comment the end of the file cut off
        at = len(text) - len(tokens.rawdata) + tokens.rawdata.index("<")
        line = text.count("\n", 0, at) + 1
        raise FormatError("a tag or comment is not closed", line, at - text.rfind("\n", 0, at))
    tokens.close()
    for event in tokens.events:
        if held is not None:
            held.end = event.start
            yield held
        held = event
    if held is not None:
        held.end = len(text)
        yield held


def tokenize(text: str) -> list[Event]:
    """Return the events of text, each with its [start, end) offsets."""
    return list(events(text))
