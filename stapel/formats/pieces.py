"""SentencePiece pieces <-> words: where each piece is in its text, and attention summed
from pieces into a [target word, source word] matrix (stapel/formats/align.py uses it)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

WORD = re.compile(r"\w+|[^\w\s]")
PIECE_SPACE = "\u2581"


def words(text: str) -> list[tuple[int, int]]:
    """Return the (start, end) spans of text's words and punctuation marks."""
    return [m.span() for m in WORD.finditer(text)]


def piece_spans(text: str, pieces: Sequence[str]) -> list[tuple[int, int]]:
    """Return each SentencePiece piece's (start, end) in text; (-1, -1) where it is none.

    Pieces that spell the text exactly (the usual case) are placed by their lengths; else
    the text is walked: a piece matches at the next non-space character, and a piece the
    text does not show verbatim (normalised characters, `<unk>`) takes one character.
    """
    spans: list[tuple[int, int]] = []
    pos = 0
    for piece in pieces:
        if piece[:1] == PIECE_SPACE:
            pos += 1 if pos else 0
            piece = piece[1:]
        spans.append((pos, pos + len(piece)) if piece else (-1, -1))
        pos += len(piece)
    if pos == len(text) and "".join(p.replace(PIECE_SPACE, " ") for p in pieces).strip() == text:
        return spans
    return _walk(text, pieces)


def _walk(text: str, pieces: Sequence[str]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    pos = 0
    for piece in pieces:
        surface = piece.lstrip(PIECE_SPACE)
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if not surface or pos >= len(text):
            spans.append((-1, -1))
            continue
        if text.startswith(surface, pos):
            spans.append((pos, pos + len(surface)))
            pos += len(surface)
        else:
            spans.append((pos, pos + 1))
            pos += 1
    return spans


def _word_of(spans: list[tuple[int, int]], word_spans: list[tuple[int, int]]) -> list[int]:
    """The word each piece starts in (or the next word); -1 for a piece that is no text."""
    if not word_spans:
        return [-1] * len(spans)
    ends = np.fromiter((end for _, end in word_spans), dtype=np.int64, count=len(word_spans))
    starts = np.fromiter((start for start, _ in spans), dtype=np.int64, count=len(spans))
    index = np.minimum(np.searchsorted(ends, starts, side="right"), len(word_spans) - 1)
    return np.where(starts < 0, -1, index).tolist()


def word_matrix(
    aligned,
    source: str,
    source_words: list[tuple[int, int]],
    target_words: list[tuple[int, int]],
) -> np.ndarray:
    """Sum the attention of pieces into a [target word, source word] matrix.

    aligned is an align.Aligned: its text, pieces on both sides and attention.
    """
    attention = np.asarray(aligned.attention, dtype=np.float32)
    if attention.ndim != 2 or not target_words or not source_words:
        return np.zeros((len(target_words), len(source_words)), dtype=np.float32)
    src = _word_of(piece_spans(source, aligned.source_pieces), source_words)
    tgt = _word_of(piece_spans(aligned.text, aligned.target_pieces), target_words)
    rows, cols = min(attention.shape[0], len(tgt)), min(attention.shape[1], len(src))
    return (
        _one_hot(tgt[:rows], len(target_words)).T
        @ attention[:rows, :cols]
        @ _one_hot(src[:cols], len(source_words))
    )


def _one_hot(word_of: list[int], words: int) -> np.ndarray:
    """A [piece, word] matrix with a 1 where the piece belongs to the word."""
    index = np.asarray(word_of, dtype=np.int64)
    out = np.zeros((len(word_of), words), dtype=np.float32)
    keep = np.flatnonzero(index >= 0)
    out[keep, index[keep]] = 1.0
    return out
