"""XML inline content (XLIFF): an element's content <-> a segment with inline codes.

An element's mixed content becomes the segment's text; each child element becomes a
code: a "pair" whose content is translated (XLIFF 1.2 `<g>`, 2.x `<pc>`, `<mrk>`) or an
"atom" kept whole (`<x/>`, `<ph>`, `<bpt>`, `<sc/>`, a protected `<mrk>`, comments). An
atom that opens a span and the atom that closes it in the same segment (`<bpt>` and
`<ept>`, `<bx/>` and `<ex/>`, `<sc/>` and `<ec/>`, `<sm/>` and `<em/>`) share one
number as an open and a close marker, so the words between them keep their markup
through alignment. Rebuilding reverses it: a pair becomes a new element like the
source's (same tag and attributes), an atom is copied.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from lxml import etree

import stapel.formats.inline as inline

Classify = Callable[[etree._Element], str]
"""Return "pair" or "atom" for an inline element."""
Partner = Callable[[etree._Element], tuple[str, str] | None]
"""Return ("open" | "close", key) for an atom that opens or closes a span, else None."""


@dataclass
class Flat:
    """An element's content as a segment, and the element behind each code number."""

    text: str = ""
    codes: dict[int, etree._Element] = field(default_factory=dict)
    pairs: set[int] = field(default_factory=set)
    """Numbers whose code is a pair element (its content is inside the markers)."""
    closers: dict[int, etree._Element] = field(default_factory=dict)
    """For an opening atom's number, the atom that closes it."""

    @property
    def translatable(self) -> bool:
        return bool(re.search(r"\w", inline.strip(self.text)))


def flatten(elem: etree._Element, classify: Classify, partner: Partner) -> Flat:
    """Turn elem's mixed content into a Flat segment."""
    flat = Flat()
    parts: list[str] = [elem.text or ""]
    opened: dict[str, int] = {}

    def walk(parent: etree._Element) -> None:
        for child in parent:
            is_element = isinstance(child.tag, str)
            if is_element and classify(child) == "pair":
                n = len(flat.codes) + 1
                flat.codes[n] = child
                flat.pairs.add(n)
                parts.append(inline.marker("open", n) + (child.text or ""))
                walk(child)
                parts.append(inline.marker("close", n))
            else:
                parts.append(_atom(flat, child, partner(child) if is_element else None, opened))
            parts.append(child.tail or "")

    walk(elem)
    flat.text = "".join(parts)
    return flat


def _atom(flat: Flat, child, role: tuple[str, str] | None, opened: dict[str, int]) -> str:
    if role is not None and role[0] == "close" and role[1] in opened:
        n = opened.pop(role[1])
        flat.closers[n] = child
        return inline.marker("close", n)
    n = len(flat.codes) + 1
    flat.codes[n] = child
    if role is not None and role[0] == "open":
        opened[role[1]] = n
        return inline.marker("open", n)
    return inline.marker("point", n)


def fill(target: etree._Element, text: str, flat: Flat) -> None:
    """Replace target's content with text, its markers turned back into flat's elements."""
    for child in list(target):
        target.remove(child)
    target.text = None
    stack = [target]
    at = 0
    for match in inline.MARKER.finditer(text):
        _append_text(stack[-1], inline.ANY_MARK.sub("", text[at : match.start()]))
        at = match.end()
        kind, n = inline.KINDS[match.group(1)], int(match.group(2))
        if n in flat.pairs:
            if kind == "open":
                stack.append(_shell(stack[-1], flat.codes[n]))
            elif kind == "close" and len(stack) > 1:
                stack.pop()
            elif kind == "point":  # a pair around no words
                _shell(stack[-1], flat.codes[n])
            continue
        source = flat.closers.get(n) if kind == "close" else flat.codes.get(n)
        if source is not None:
            atom = copy.deepcopy(source)
            atom.tail = None
            stack[-1].append(atom)
    _append_text(stack[-1], inline.ANY_MARK.sub("", text[at:]))


def _shell(parent: etree._Element, like: etree._Element) -> etree._Element:
    """Append an element with like's tag and attributes (and none of its content)."""
    elem = etree.SubElement(parent, like.tag, dict(like.attrib), nsmap=None)
    return elem


def _append_text(parent: etree._Element, text: str) -> None:
    if not text:
        return
    if len(parent):
        last = parent[-1]
        last.tail = (last.tail or "") + text
    else:
        parent.text = (parent.text or "") + text


def content_is_empty(elem: etree._Element | None) -> bool:
    """Whether an element is missing or holds no text and no children."""
    return elem is None or (not (elem.text or "").strip() and len(elem) == 0)
