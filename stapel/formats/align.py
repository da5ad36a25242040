"""Put a segment's inline codes back into its translation, by word alignment.

The translator saw the plain sentence; with its translation it returns, for every
target piece, how much attention it paid to every source piece (CTranslate2's
`return_attention`, from the alignment layer and heads chosen when the model was
converted). Pieces are summed into words; each target word is linked to the source
word it attends to most. A paired code (`<b>old man</b>`) then spans the target words
linked to its source words (their first to their last), a standalone code (`<x/>`,
`%s`) goes before the target word linked to the source word it precedes (or after the
one linked to the word it follows). Codes that find no word stay at the nearest end of
the sentence; none is ever dropped. The result nests properly whatever the alignment
says: a code is clamped into its parent, siblings that would cross are shortened, and
the halves of pairs whose other halves are outside the segment keep their order and
never land inside a span.
docs/formats.md has the measured accuracy.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import stapel.formats.inline as inline
from stapel.formats.inline import Code
from stapel.formats.pieces import word_matrix, words

log = logging.getLogger(__name__)

TRIM_SHARE = 0.8
"""A word at the edge of a span that is no source word's best match is dropped when less
than this share of its attention goes to the span's source words (an article that
attends to its noun: "an <b>actor</b>" for "ein <b>Schauspieler</b>"), and kept when
more does (both words of "swimming pool" for "Schwimmbad"). Chosen on training-side
sentences (docs/formats.md)."""


@dataclass(frozen=True)
class Aligned:
    """A translation with what placing codes needs: pieces on both sides and attention."""

    text: str
    source_pieces: Sequence[str]
    target_pieces: Sequence[str]
    attention: Sequence[Sequence[float]]
    """One row per target piece, one column per source piece (a final `</s>` column may
    follow; it is ignored)."""
    score: float | None = None
    """The model's score of text (stapel.scores)."""


@dataclass
class _Span:
    open: Code
    close: Code
    start: int
    end: int
    depth: int = 0


class Placer:
    """Maps source words to target words for one aligned segment."""

    def __init__(self, source: str, aligned: Aligned) -> None:
        self.source, self.target = source, aligned.text
        self.sw, self.tw = words(source), words(aligned.text)
        self.matrix = matrix = word_matrix(aligned, source, self.sw, self.tw)
        self.forward: list[int] = [-1] * len(self.tw)
        self.backward: list[int] = [-1] * len(self.sw)
        if matrix.size:  # each word's best partner, where it pays any attention at all
            self.forward = np.where(matrix.sum(1) > 0, matrix.argmax(1), -1).tolist()
            self.backward = np.where(matrix.sum(0) > 0, matrix.argmax(0), -1).tolist()

    def targets_of(self, source_words: set[int]) -> list[int]:
        """The target words these source words became: one contiguous run.

        The candidates are the target words linked to them (or, when none is, each
        one's best target word); of the runs of consecutive candidates, the one that
        pays them the most attention wins, so a stray link elsewhere in the sentence
        does not stretch the span; then loosely attached words leave its edges.
        """
        linked = [j for j, i in enumerate(self.forward) if i in source_words]
        core = {self.backward[i] for i in source_words if i < len(self.backward)} - {-1}
        if not linked:
            linked = sorted(core)
        if not linked:
            return []
        runs: list[list[int]] = [[linked[0]]]
        for j in linked[1:]:
            if j == runs[-1][-1] + 1:
                runs[-1].append(j)
            else:
                runs.append([j])
        cols = sorted(source_words)
        run = max(runs, key=lambda run: float(self.matrix[np.ix_(run, cols)].sum()))
        if not core & set(run):
            return run

        def loose(j: int) -> bool:
            row = self.matrix[j]
            return j not in core and float(row[cols].sum()) < TRIM_SHARE * float(row.sum())

        while len(run) > 1 and loose(run[0]):
            run = run[1:]
        while len(run) > 1 and loose(run[-1]):
            run = run[:-1]
        return run

    def covered(self, start: int, end: int) -> set[int]:
        """Source words inside the plain-text range [start, end); when it holds none, the
        words it cuts into (`Para<b>gr</b>aph` spans the word it is part of)."""
        inside = {i for i, (a, b) in enumerate(self.sw) if a >= start and b <= end and a < b}
        if inside or start >= end:
            return inside
        return {i for i, (a, b) in enumerate(self.sw) if a < end and b > start}

    def boundary(self, offset: int) -> int:
        """The nearest end of the target for a source offset."""
        return 0 if offset * 2 < len(self.source) else len(self.target)

    def point(self, code: Code) -> int:
        """The target offset of a standalone code."""
        o = code.offset
        if not self.sw or not self.tw:
            return self.boundary(o)
        if o <= self.sw[0][0]:
            return 0
        if o >= self.sw[-1][1]:
            return len(self.target)
        within = next((i for i, (a, b) in enumerate(self.sw) if a < o < b), None)
        if within is not None:  # inside a word: at the nearer end of what it became
            a, b = self.sw[within]
            linked = self.targets_of({within})
            if not linked:
                return self.boundary(o)
            return self.tw[max(linked)][1] if o - a >= b - o else self.tw[min(linked)][0]
        after = next(i for i, (a, _b) in enumerate(self.sw) if a >= o)
        before = after - 1
        touches_next = self.sw[after][0] == o and not code.space_after
        touches_prev = self.sw[before][1] == o and not code.space_before
        next_is_word = (
            self.sw[after][1] - self.sw[after][0] > 1 or self.source[o:].strip()[:1].isalnum()
        )
        if touches_prev or (not touches_next and not next_is_word):
            linked = self.targets_of({before})
            return self.tw[max(linked)][1] if linked else self.boundary(o)
        linked = self.targets_of({after})
        return self.tw[min(linked)][0] if linked else self.boundary(o)

    def span(self, open_: Code, close: Code) -> tuple[int, int] | None:
        """The target (start, end) of a paired code, or None when it covers no word."""
        inside = self.covered(open_.offset, close.offset)
        if not inside:
            return None
        linked = self.targets_of(inside)
        if not linked:
            at = self.boundary(open_.offset)
            return at, at
        return self.tw[min(linked)][0], self.tw[max(linked)][1]


def place(source: str, aligned: Aligned) -> str:
    """Return aligned.text with source's codes placed; source is the tagged segment.

    Whatever the alignment, every code comes back once and nested: a placement that
    fails or breaks that rule is replaced by `at_edges`.
    """
    try:
        out = _place(source, aligned)
    except Exception as exc:
        log.warning("event=placement_failed fallback=edges error=%s", type(exc).__name__)
        return at_edges(source, aligned.text)
    if not inline.same_codes(source, out):
        log.warning("event=placement_failed fallback=edges error=codes_changed")
        return at_edges(source, aligned.text)
    return out


def at_edges(source: str, text: str) -> str:
    """Return text with source's codes around it: openings first, the rest at the end.

    The rule when words cannot be aligned (a unit translated in several pieces, a
    placement that failed): no code is dropped, each stays at a boundary in source
    order. The pairs' closings come last opened first, so siblings (`<1>a</1> <2>b</2>`)
    nest instead of crossing.
    """
    _plain, codes = inline.split(source)
    order = {id(code): n for n, code in enumerate(codes)}
    closing = {id(close): order[id(open_)] for open_, close in inline.pairs(codes).values()}
    ends = sorted(
        (code for code in codes if code.kind != "open"),
        key=lambda code: (id(code) not in closing, -closing.get(id(code), 0), order[id(code)]),
    )
    starts = [code for code in codes if code.kind == "open"]
    moved = [dataclasses.replace(code, offset=0) for code in starts] + [
        dataclasses.replace(code, offset=len(text)) for code in ends
    ]
    return inline.join(inline.strip(text), moved)


def _place(source: str, aligned: Aligned) -> str:
    plain, codes = inline.split(source)
    if not codes:
        return aligned.text
    placer = Placer(plain, aligned)
    paired = inline.pairs(codes)
    spans = _spans(placer, codes, paired)
    events: list[tuple[int, int, int, str]] = []
    for s in spans:
        if s.start == s.end:  # shortened to nothing: both markers at one point
            events.append((s.start, 1, len(codes), s.open.marker + s.close.marker))
            continue
        events.append((s.end, 0, -s.depth, s.close.marker))
        events.append((s.start, 2, s.depth, s.open.marker))
    in_pairs = {id(c) for pair in paired.values() for c in pair}
    used = {id(s.open) for s in spans}
    floor = 0
    for order, code in enumerate(codes):
        if id(code) in in_pairs and id(code) in used:
            continue
        if id(code) in in_pairs and code.kind == "close":
            continue
        if id(code) in in_pairs:  # a pair around no word: both markers at one point
            close = paired[code.id][1]
            at = placer.point(code)
            events.append((at, 1, order, code.marker + close.marker))
            continue
        at = placer.point(code)
        if code.kind != "point":  # half of a pair the segment does not hold whole
            at = floor = _outside(max(at, floor), spans)
        events.append((at, 1, order, _spaced(code, at, placer.target)))
    return _assemble(placer.target, events)


def _outside(at: int, spans: list[_Span]) -> int:
    """Where half of a pair whose other half is outside the segment may go: at or after
    at, never strictly inside a span (it would cross that span's pair)."""
    inside = [s.end for s in spans if s.start < at < s.end]
    return max(inside, default=at)


def _spaced(code: Code, at: int, text: str) -> str:
    """A standalone code's marker with the spaces it had, where the text has none."""
    out = code.marker
    if code.space_before and at > 0 and not text[at - 1].isspace():
        out = " " + out
    if code.space_after and at < len(text) and text[at].isalnum():
        out = out + " "
    return out


def _spans(placer: Placer, codes: list[Code], paired: dict[int, tuple[Code, Code]]) -> list[_Span]:
    """Target spans of the paired codes, nested like the source's: clamped and uncrossed."""
    spans: list[_Span] = []
    stack: list[_Span] = []
    for code in codes:
        if code.kind == "close" and stack and stack[-1].close is code:
            stack.pop()
            continue
        if code.kind != "open" or code.id not in paired or paired[code.id][0] is not code:
            continue
        placed = placer.span(*paired[code.id])
        if placed is None:
            continue
        start, end = placed
        span = _Span(code, paired[code.id][1], start, end, len(stack))
        spans.append(span)
        stack.append(span)
    _uncross(spans)
    return spans


def _uncross(spans: list[_Span]) -> None:
    """Clamp each span into its parent and shorten siblings that overlap, parents first."""
    parent: dict[int, int | None] = {}
    stack: list[int] = []
    for i, s in enumerate(spans):  # spans are in source order, parents before children
        while stack and spans[stack[-1]].depth >= s.depth:
            stack.pop()
        parent[i] = stack[-1] if stack else None
        stack.append(i)
    for depth in sorted({s.depth for s in spans}):
        siblings: dict[int | None, list[_Span]] = {}
        for i, s in enumerate(spans):
            if s.depth != depth:
                continue
            p = parent[i]
            if p is not None:
                s.start = min(max(s.start, spans[p].start), spans[p].end)
                s.end = min(max(s.end, s.start), spans[p].end)
            siblings.setdefault(p, []).append(s)
        for group in siblings.values():
            last_end = -1
            for s in sorted(group, key=lambda s: (s.start, -s.end)):
                if s.start < last_end:
                    s.start = min(last_end, s.end)
                last_end = max(last_end, s.end)


def _assemble(text: str, events: list[tuple[int, int, int, str]]) -> str:
    """Insert markers: at one offset closes (innermost first), then points, then opens."""
    out, at = [], 0
    for offset, _rank, _order, mark in sorted(events, key=lambda e: (e[0], e[1], e[2])):
        out.append(text[at:offset])
        out.append(mark)
        at = offset
    out.append(text[at:])
    return "".join(out)
