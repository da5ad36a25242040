"""The HTML tokenizer: the standard library's, with each event's offsets in the text."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator
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
    raw: str = ""
    """A text event's text as written (the reader never holds the whole document)."""


class _Tokens(HTMLParser):
    """Collects events with their offsets in the text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.starts = [0]
        """Where each line from line `first` + 1 on starts (grown chunk by chunk, and cut
        at the parser's position: a file of newlines is not a list of its lines)."""
        self.first = 0
        self.events: list[Event] = []

    def _add(self, kind: str, tag: str = "", attrs=None) -> None:
        line, column = self.getpos()
        start = self.starts[line - 1 - self.first] + column
        self.events.append(Event(kind, start, -1, tag, attrs or [], line, column + 1))

    def forget_lines(self) -> None:
        """Drop the starts of the lines before the parser's position (never asked again)."""
        drop = self.getpos()[0] - 1 - self.first
        if drop > 0:
            del self.starts[:drop]
            self.first += drop

    def place(self, at: int) -> tuple[int, int]:
        """The 1-based (line, column) of an offset at or after the parser's position."""
        k = bisect_right(self.starts, at)
        return self.first + k, at - self.starts[k - 1] + 1

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


class _Window:
    """The text from the start of the event not yet yielded on, in the chunks it came in."""

    def __init__(self) -> None:
        self.chunks: deque[tuple[int, str]] = deque()
        self.end = 0

    def add(self, chunk: str) -> None:
        self.chunks.append((self.end, chunk))
        self.end += len(chunk)

    def drop(self, upto: int) -> None:
        while self.chunks and self.chunks[0][0] + len(self.chunks[0][1]) <= upto:
            self.chunks.popleft()

    def slice(self, start: int, end: int) -> str:
        return "".join(
            chunk[max(start - at, 0) : end - at]
            for at, chunk in self.chunks
            if at < end and at + len(chunk) > start
        )


def _chunks(text: str | Iterable[str]) -> Iterator[str]:
    for piece in [text] if isinstance(text, str) else text:
        for at in range(0, len(piece), CHUNK):
            yield piece[at : at + CHUNK]


def events(text: str | Iterable[str]) -> Iterator[Event]:
    """Yield the events of text (a str, or its pieces in order), each with its [start,
    end) offsets, as the text is read: an event is yielded once the next one starts
    (that is where it ends), a text event with its text; what lies before it is dropped."""
    tokens = _Tokens()
    window = _Window()
    held: Event | None = None
    found: list[Event] = []
    for chunk in _chunks(text):
        at = window.end
        window.add(chunk)
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
                yield _ended(held, event.start, window)
            held = event
        window.drop(held.start if held is not None else window.end - len(tokens.rawdata))
        tokens.forget_lines()
    if "<" in tokens.rawdata:  # a tag or comment the end of the file cut off
        at = window.end - len(tokens.rawdata) + tokens.rawdata.index("<")
        raise FormatError("a tag or comment is not closed", *tokens.place(at))
    tokens.close()
    for event in tokens.events:
        if held is not None:
            yield _ended(held, event.start, window)
        held = event
    if held is not None:
        yield _ended(held, window.end, window)


def _ended(event: Event, end: int, window: _Window) -> Event:
    event.end = end
    if event.kind == "text":
        event.raw = window.slice(event.start, end)
    return event


def tokenize(text: str) -> list[Event]:
    """Return the events of text, each with its [start, end) offsets."""
    return list(events(text))
