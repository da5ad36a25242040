"""XML text with tags (DeepL's `tag_handling=xml`): its text runs, with every byte kept.

The text is checked with lxml as the content of one element (well-formed, no DTD, no
entity expansion), then walked by its tags, so the runs point into the original text
and whatever Stapel does not translate stays as it was sent (attributes, quotes, an
empty `<x id="3"></x>` that Weblate looks for verbatim). Each element is one of:

- ignored (`ignore_tags`): a standalone code kept whole, content and all;
- a boundary: its tags end the text run before them and are not codes, its content is
  runs of its own. Boundaries are the `splitting_tags` and, with outline detection (on
  by default, as in DeepL), the structure at the top of the text: when the text (or a
  boundary) holds elements and no text of its own, each of those elements is a
  boundary. An element holding a boundary is one too, so a run never holds half of an
  element;
- inline: a paired code (an empty element a standalone one) inside its run.

Elements named in `non_splitting_tags` are never boundaries by outline detection.
Comments, processing instructions and CDATA sections are standalone codes. A run's
whitespace is kept as sent (only its ends are trimmed).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

import stapel.formats.inline as inline
from stapel.formats.base import FormatError, parse_xml, position
from stapel.formats.htmlruns import Piece, Run

ROOT = "stapel-fragment"
"""The element the text is checked inside of."""
TOKEN = re.compile(
    r"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>|</[^>]*>|<(?:[^>\"']|\"[^\"]*\"|'[^']*')*>", re.S
)
PROLOG = re.compile(r"\s+|<!--.*?-->|<\?.*?\?>|<!DOCTYPE\b[^>]*>", re.S | re.I)
"""What may stand before a text's first element: space, comments, PIs, a DOCTYPE."""
BARE_DOCTYPE = re.compile(r"<!DOCTYPE\s+[^\s\[\]<>\"']+\s*>", re.IGNORECASE)
NAME = re.compile(r"</?\s*([^\s/>]+)")
WORDS = re.compile(r"\w")


@dataclass
class _Element:
    tag: str
    start: int
    """Index of its start tag in the token list."""
    parent: int | None
    end: int = -1
    """Index of its end tag (its start tag's for an empty element)."""
    text: bool = False
    """Words or non-space characters stand directly inside it."""
    children: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Rules:
    """DeepL's tag options for XML."""

    ignore: frozenset[str] = frozenset()
    splitting: frozenset[str] = frozenset()
    non_splitting: frozenset[str] = frozenset()
    outline: bool = True


def check(text: str) -> None:
    """Raise FormatError (with the text's line and column) unless text is well-formed."""
    wrapped = f"<{ROOT}>{_without_doctype(text)}</{ROOT}>"
    try:
        parse_xml(wrapped.encode())
    except FormatError as exc:
        line, column = exc.line or 1, exc.column or 1
        if line == 1:
            column -= len(ROOT) + 2
        lines = text.split("\n")
        line = min(line, len(lines))
        column = max(1, min(column, len(lines[line - 1]) + 1))
        raise FormatError(_message(exc.message), line, column) from None


def _without_doctype(text: str) -> str:
    """The text with a bare DOCTYPE before its first element blanked (same offsets).

    A text may open as a document does (`<!DOCTYPE html>`), which is not well-formed
    inside the wrapping element; a bare one declares nothing and stays a standalone code.
    One with declarations or an external DTD is refused, as in a document.
    """
    out, at = [], 0
    while match := PROLOG.match(text, at):  # anchored: each item read once, linear
        raw = match.group(0)
        if raw[:9].upper() == "<!DOCTYPE":
            if not BARE_DOCTYPE.fullmatch(raw):
                line, column = position(text, match.start())
                raise FormatError(
                    "a DOCTYPE with declarations or an external DTD is not accepted; "
                    "a bare <!DOCTYPE name> is",
                    line,
                    column,
                )
            raw = " " * len(raw)
        out.append(raw)
        at = match.end()
    return "".join(out) + text[at:]


def _message(message: str) -> str:
    """lxml's message without its own position, and in terms of the text, not the wrapper."""
    message = re.sub(r", line \d+, column \d+$", "", message)
    mismatch = re.search(r"mismatch: (\S+) line \d+ and (\S+)$", message)
    if mismatch:
        opened, closing = mismatch.groups()
        if closing == ROOT:
            return f"malformed XML: <{opened}> is never closed"
        if opened == ROOT:
            return f"malformed XML: </{closing}> closes nothing"
        return f"malformed XML: </{closing}> does not close <{opened}>, which is still open"
    return message.replace(ROOT, "the text")


def _tokens(text: str) -> list[tuple[str, int, int]]:
    """Return (kind, start, end) of every tag and text: start, end, empty, text, other."""
    out: list[tuple[str, int, int]] = []
    at = 0
    for match in TOKEN.finditer(text):
        if match.start() > at:
            out.append(("text", at, match.start()))
        raw = match.group(0)
        if raw.startswith(("<!", "<?")):
            kind = "other"
        elif raw.startswith("</"):
            kind = "end"
        else:
            kind = "empty" if raw.endswith("/>") else "start"
        out.append((kind, match.start(), match.end()))
        at = match.end()
    if at < len(text):
        out.append(("text", at, len(text)))
    return out


def _tree(text: str, tokens: list[tuple[str, int, int]]) -> list[_Element]:
    """The elements in document order; element 0 is the text itself."""
    elements = [_Element("", -1, None)]
    stack = [0]
    for i, (kind, start, end) in enumerate(tokens):
        if kind == "text":
            elements[stack[-1]].text |= bool(text[start:end].strip())
        elif kind in ("start", "empty"):
            match = NAME.match(text, start)
            elem = _Element(match.group(1) if match else "", i, stack[-1], i)
            elements[stack[-1]].children.append(len(elements))
            elements.append(elem)
            if kind == "start":
                stack.append(len(elements) - 1)
        elif kind == "end" and len(stack) > 1:
            elements[stack.pop()].end = i
        elif kind == "other" and text.startswith("<![CDATA[", start):
            elements[stack[-1]].text = True
    return elements


def _boundaries(elements: list[_Element], rules: Rules) -> set[int]:
    """The elements whose tags split runs (element 0 is the text itself, never a tag)."""
    found: set[int] = set()
    containers: set[int] = set()
    for n, elem in enumerate(elements):  # parents come before their children
        outlined = n == 0 or (
            rules.outline
            and elem.parent in containers
            and elem.tag not in rules.non_splitting
            and elem.tag not in rules.ignore
        )
        if not outlined:
            continue
        if n:
            found.add(n)
        if elem.children and not elem.text:  # only elements inside: each is its own run
            containers.add(n)
    for n, elem in enumerate(elements):
        if n and elem.tag in rules.splitting and elem.tag not in rules.ignore:
            parent = elem.parent
            found.add(n)
            while parent:  # its ancestors too: a run holds whole elements
                found.add(parent)
                parent = elements[parent].parent
    return found


class _Runs:
    """Collects the text runs while walking the tokens."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.runs: list[Run] = []
        self.run = Run()
        self.codes = 0
        self.opened: list[Piece] = []

    def piece(self, start: int, end: int, kind: str) -> Piece:
        self.codes += 1  # a count, not a scan of the run: linear in the tags
        piece = Piece(start, end, kind=kind, number=self.codes)
        self.run.pieces.append(piece)
        return piece

    def end_run(self) -> None:
        run, self.run, self.opened, self.codes = self.run, Run(), [], 0
        if any(p.kind == "text" and WORDS.search(p.text) for p in run.pieces):
            self.runs.append(run)


def segment(run: Run) -> str:
    """The run's text as a segment, codes as markers; unlike HTML's, its whitespace kept
    (a line break between sentences stays one: the worker joins sentences with it)."""
    parts = [p.text if p.kind == "text" else inline.marker(p.kind, p.number) for p in run.pieces]
    return "".join(parts).strip(" \t\n\r\f")


def units(text: str, rules: Rules) -> list[Run]:
    """Return the text runs to translate, in order; FormatError if not well-formed."""
    check(text)
    tokens = _tokens(text)
    elements = _tree(text, tokens)
    boundary = _boundaries(elements, rules)
    by_token = {elem.start: n for n, elem in enumerate(elements) if n}
    ends = {elem.end: n for n, elem in enumerate(elements) if n and elem.end != elem.start}
    out = _Runs(text)
    i = 0
    while i < len(tokens):
        kind, start, end = tokens[i]
        n = by_token.get(i) if kind in ("start", "empty") else ends.get(i)
        elem = elements[n] if n is not None else None
        if kind == "text":
            out.run.pieces.append(Piece(start, end, html.unescape(text[start:end])))
        elif elem is None:
            out.piece(start, end, "point")
        elif n in boundary:
            out.end_run()
        elif elem.tag in rules.ignore:
            last = tokens[elem.end]
            out.piece(start, last[2], "point")
            i = elem.end
        elif kind == "empty":
            out.piece(start, end, "point")
        elif kind == "start":
            out.opened.append(out.piece(start, end, "open"))
        elif out.opened:
            opener = out.opened.pop()
            out.run.pieces.append(Piece(start, end, kind="close", number=opener.number))
        else:  # not reached: a run holds whole elements
            out.piece(start, end, "point")
        i += 1
    out.end_run()
    return out.runs
