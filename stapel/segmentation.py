"""Cut a segment into pieces a model can translate, and join their translations back.

A segment becomes pieces: its sentences (sentencex, when sentence splitting is on), and
each sentence still over the model's input limit is cut (`cut`) at the last whitespace
or punctuation that keeps it under the limit. Each piece keeps the whitespace around it
apart (`Piece.lead`, `Piece.trail`), so the translations are joined with the source's
own whitespace and the segment still has exactly one target.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sentencex

_SPACE = re.compile(r"^(\s*)(.*?)(\s*)$", re.DOTALL)


@dataclass(frozen=True)
class Piece:
    """One piece of a segment: the text to translate and the whitespace around it."""

    lead: str
    text: str
    trail: str


def sentences(text: str, lang: str) -> list[str]:
    """Return text's sentences with their trailing whitespace; they join back to text."""
    found = list(sentencex.segment(lang.split("_")[0], text))
    return found if "".join(found) == text else [text]


def pieces(text: str, lang: str, *, split_sentences: bool) -> list[Piece]:
    """Return text's pieces: its sentences (or text whole), whitespace set apart.

    A whitespace-only piece has an empty text: it needs no translation.
    """
    parts = sentences(text, lang) if split_sentences else [text]
    return [Piece(*_around(part)) for part in parts]


def cut(piece: Piece, fits: Callable[[str], bool]) -> list[Piece]:
    """Cut a piece too long for the model into pieces that fit (see cut_to_fit)."""
    bits = cut_to_fit(piece.text, fits)
    out = []
    for n, bit in enumerate(bits):
        lead, core, trail = _around(bit)
        first, last = n == 0, n == len(bits) - 1
        out.append(
            Piece((piece.lead if first else "") + lead, core, trail + (piece.trail if last else ""))
        )
    return out


def join(parts: Sequence[Piece], translations: Sequence[str]) -> str:
    """Return the translations joined with the source's whitespace around each piece."""
    return "".join(
        p.lead + (t if p.text else "") + p.trail for p, t in zip(parts, translations, strict=True)
    )


def cut_to_fit(text: str, fits: Callable[[str], bool]) -> list[str]:
    """Cut text into consecutive parts that fit, each ending at a break where it can.

    A part ends after the last whitespace or punctuation for which it still fits; text
    without such a break in reach is cut at the last character that fits. The parts
    join back to text.
    """
    out: list[str] = []
    rest = text
    while rest and not fits(rest):
        end = _longest_fitting(rest, _breaks(rest), fits)
        if end is None:
            end = _longest_fitting(rest, range(1, len(rest)), fits) or 1
        out.append(rest[:end])
        rest = rest[end:]
    if rest:
        out.append(rest)
    return out


def _around(text: str) -> tuple[str, str, str]:
    match = _SPACE.match(text)
    assert match is not None  # the pattern matches any string
    return match.group(1), match.group(2), match.group(3)


def _breaks(text: str) -> list[int]:
    """Offsets just after each run of whitespace or punctuation, in order."""
    ends = []
    for i, char in enumerate(text[:-1]):
        if _is_break(char) and not _is_break(text[i + 1]):
            ends.append(i + 1)
    return ends


def _is_break(char: str) -> bool:
    return char.isspace() or unicodedata.category(char).startswith("P")


def _longest_fitting(text: str, ends: Sequence[int], fits: Callable[[str], bool]) -> int | None:
    """The largest end in ends (ascending) with text[:end] fitting, by bisection."""
    lo, hi, best = 0, len(ends) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(text[: ends[mid]]):
            best, lo = ends[mid], mid + 1
        else:
            hi = mid - 1
    return best
