"""Seeded parallel corpus with a hash-based held-out split, and its SentencePiece model."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from training.grammar import SentenceGenerator

TEST_PERCENT = 3


@dataclass
class Corpus:
    """Unique English-German pairs split into training and held-out test sets."""

    train: list[tuple[str, str]]
    test: list[tuple[str, str]]


def is_held_out(english: str) -> bool:
    """Whether a sentence belongs to the test side, decided by a hash of its text."""
    digest = hashlib.sha256(english.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") % 100 < TEST_PERCENT


def build_corpus(n_train: int, n_test: int, seed: int = 0) -> Corpus:
    """Generate unique pairs until both sides are full; the same seed gives the same corpus."""
    gen = SentenceGenerator(seed)
    seen: set[str] = set()
    train: list[tuple[str, str]] = []
    test: list[tuple[str, str]] = []
    while len(train) < n_train or len(test) < n_test:
        en, de = gen.pair()
        if en in seen:
            continue
        seen.add(en)
        side = test if is_held_out(en) else train
        limit = n_test if side is test else n_train
        if len(side) < limit:
            side.append((en, de))
    return Corpus(train, test)
