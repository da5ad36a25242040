"""Inline codes inside a segment: how tags travel from a document to the worker and back.

A segment's source keeps each inline code of its document (a bold run, a link, an XLIFF
`<g>` or `<x/>`, a PO placeholder) as a marker made of Unicode noncharacters, which
Unicode reserves for a program's internal use and which no client text carries:

    OPEN + n + END     the start of paired code n      (U+FDD0 n U+FDD3)
    CLOSE + n + END    the end of paired code n        (U+FDD1 n U+FDD3)
    POINT + n + END    a standalone code n             (U+FDD2 n U+FDD3)

n is the code's number within the segment; what the code stands for (its XML, its
formatting) stays with the document and is put back when the file is rebuilt. The
worker translates the plain text and re-places the markers by word alignment
(stapel/formats/align.py); the result keeps the same markers, so the document's format
turns them back into its own markup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OPEN, CLOSE, POINT, END = "\ufdd0", "\ufdd1", "\ufdd2", "\ufdd3"
KINDS = {OPEN: "open", CLOSE: "close", POINT: "point"}
MARKER = re.compile("([\ufdd0\ufdd1\ufdd2])([0-9]{1,6})\ufdd3")
ANY_MARK = re.compile("[\ufdd0-\ufdd3]")


@dataclass(frozen=True)
class Code:
    """One marker of a segment, at an offset of the segment's plain text."""

    kind: str
    """"open", "close" or "point"."""
    id: int
    offset: int
    space_before: bool = False
    """A space stood right before the marker in the segment."""
    space_after: bool = False
    """A space stood right after the marker."""

    @property
    def marker(self) -> str:
        return marker(self.kind, self.id)

    @property
    def spaced(self) -> bool:
        """A point code that stood as a word of its own ("Delete %s files")."""
        return self.kind == "point" and self.space_before and self.space_after


def marker(kind: str, number: int) -> str:
    """Return the marker text of a code."""
    start = {"open": OPEN, "close": CLOSE, "point": POINT}[kind]
    return f"{start}{number}{END}"


def has_codes(text: str) -> bool:
    """Whether text carries any marker."""
    return ANY_MARK.search(text) is not None


def strip(text: str) -> str:
    """Return text without its markers (the words a translator sees)."""
    return split(text)[0]


def split(text: str) -> tuple[str, list[Code]]:
    """Return the plain text and its codes, each at its offset in the plain text.

    A point code standing between two spaces takes the space before it along, so the
    plain text keeps single spaces ("Delete %s files" -> "Delete files"); `join` puts
    it back. Stray marker characters that form no marker are dropped.
    """
    plain = ""
    codes: list[Code] = []
    at = 0
    for match in MARKER.finditer(text):
        plain += ANY_MARK.sub("", text[at : match.start()])
        kind, number = KINDS[match.group(1)], int(match.group(2))
        code = Code(
            kind,
            number,
            len(plain),
            space_before=plain.endswith(" "),
            space_after=text[match.end() : match.end() + 1] == " ",
        )
        if code.spaced:
            plain = plain[:-1]
            code = Code(kind, number, len(plain), True, True)
        codes.append(code)
        at = match.end()
    return plain + ANY_MARK.sub("", text[at:]), codes


def join(plain: str, codes: list[Code]) -> str:
    """Insert codes (in list order at equal offsets) into plain text: split's inverse."""
    out: list[str] = []
    at = 0
    for _, code in sorted(enumerate(codes), key=lambda item: (item[1].offset, item[0])):
        out.append(plain[at : code.offset])
        at = code.offset
        out.append(" " + code.marker if code.spaced else code.marker)
    out.append(plain[at:])
    return "".join(out)


def pairs(codes: list[Code]) -> dict[int, tuple[Code, Code]]:
    """Return the paired codes by number: (open, close), properly nested or not included.

    An open without its close (or the reverse), or pairs that cross, count as points
    for placement: they are left out here.
    """
    found: dict[int, tuple[Code, Code]] = {}
    stack: list[Code] = []
    for code in codes:
        if code.kind == "open":
            stack.append(code)
        elif code.kind == "close":
            if stack and stack[-1].id == code.id:
                found[code.id] = (stack.pop(), code)
            elif any(c.id == code.id for c in stack):
                while stack and stack[-1].id != code.id:
                    stack.pop()  # crossing: the inner opens lose their pairing
                found[code.id] = (stack.pop(), code)
    return found


def same_codes(source: str, target: str) -> bool:
    """Whether target holds source's markers, each as often, and its pairs nest as
    source's do (a pair well formed in source is well formed in target)."""
    markers = sorted(m.group(0) for m in MARKER.finditer(source))
    if markers != sorted(m.group(0) for m in MARKER.finditer(target)):
        return False
    return set(pairs(split(source)[1])) <= _nested(split(target)[1])


def _nested(codes: list[Code]) -> set[int]:
    """The numbers of the pairs that open and close properly nested."""
    found: set[int] = set()
    stack: list[int] = []
    for code in codes:
        if code.kind == "open":
            stack.append(code.id)
        elif code.kind == "close" and code.id in stack:
            while stack[-1] != code.id:
                stack.pop()
            found.add(stack.pop())
    return found


def readable(text: str) -> str:
    """Show markers as `<n>`, `</n>` and `<n/>` (the JSON and text results)."""

    def show(match: re.Match) -> str:
        kind, number = KINDS[match.group(1)], match.group(2)
        return {"open": f"<{number}>", "close": f"</{number}>", "point": f"<{number}/>"}[kind]

    return ANY_MARK.sub("", MARKER.sub(show, text))
