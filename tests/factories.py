"""Factories for test data: job requests and polling helpers."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def job_body(segments: list[str] | None = None, **fields) -> dict:
    """Return a valid en-de job body with the given segments and extra fields."""
    body = {
        "source_lang": "en",
        "target_lang": "de",
        "segments": segments if segments is not None else ["Hello world.", "Good day."],
    }
    body.update(fields)
    return body


def sentences(n: int, seed: int = 0) -> list[str]:
    """Return n distinct short English-looking sentences of varied length."""
    words = [
        "the",
        "house",
        "is",
        "small",
        "a",
        "dog",
        "runs",
        "we",
        "see",
        "green",
        "trees",
        "today",
        "she",
        "reads",
        "books",
        "and",
        "he",
        "writes",
    ]
    # The pattern below repeats every 18 sentences; past that, each sentence starts with
    # its index written in words (base 18, fixed width), so all n stay distinct: a job of
    # repeated sentences is translated once (dedup in flight, the MT cache) and would not
    # be the load a test means.
    width = 0 if n <= 18 else len(_digits(n - 1, len(words)))
    out = []
    for i in range(n):
        k = 3 + (i * 7 + seed) % 9
        body = [words[(i * 3 + j + seed) % len(words)] for j in range(k)]
        tag = [words[d] for d in _digits(i, len(words), width)] if width else []
        out.append(" ".join(tag + body) + ".")
    return out


def _digits(value: int, base: int, width: int = 1) -> list[int]:
    """value's digits in base, most significant first, padded to width."""
    out = []
    while value or len(out) < width:
        out.append(value % base)
        value //= base
    return out[::-1] or [0]


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    interval: float = 0.1,
    what: str = "condition",
) -> T:
    """Poll predicate until it returns a truthy value; fail after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


_USED: dict[int, set[str]] = {}


def same_width(batcher, n: int, like: str = "ab") -> list[str]:
    """Return n texts of as many tokens as `like`, none used before on this batcher.

    Identical pieces in flight are translated once (dedup), so tests about how batches
    are cut give each piece a text of its own with the same size.
    """
    width = len(batcher._encode([like])[0])
    used = _USED.setdefault(id(batcher), set())
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = like.split(" ")
    candidates = [a + b for a in letters for b in letters] if len(words) == 1 else []
    for pos in range(len(words)):
        for a in letters:
            for b in letters:
                candidates.append(" ".join([*words[:pos], a + b, *words[pos + 1 :]]))
    out = []
    for text in candidates:
        if text not in used and len(batcher._encode([text])[0]) == width:
            used.add(text)
            out.append(text)
            if len(out) == n:
                return out
    raise AssertionError(f"fewer than {n} texts as wide as {like!r}")
