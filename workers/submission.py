"""One task's segments inside a batcher: cut into pieces, and put back together.

A segment goes into the batcher as one or more pieces (its sentences, cut to the
model's input limit: stapel.segmentation); the pieces travel in the shared batches like
any other segment, and the segment is handed back to its task once all of its pieces
are translated, joined with the source's whitespace. A piece that fails alone fails
its segment: the task gets a SegmentError in place of the text.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from stapel import segmentation
from stapel.scores import MEMORY_SCORE, Scored, combine, from_log_prob, score_of
from stapel.segmentation import Piece


class Lanes(Protocol):
    """What a submission needs of its batcher (workers.batcher.Batcher)."""

    def withdraw(self, request: Submission) -> None: ...

    def progressing(self, within_s: float) -> bool: ...

    def release(self, request: Submission) -> None: ...


_DONE = object()

MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class SegmentError:
    """Why one segment could not be translated (it failed alone, in a batch of one)."""

    code: str
    message: str

    @classmethod
    def from_exception(cls, exc: BaseException) -> SegmentError:
        """Describe an engine error raised by a batch that held only this segment's piece."""
        text = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
        code = "input_too_long" if "position encodings" in text else "translation_failed"
        return cls(code, f"the model could not translate this segment ({text})")


Result = str | SegmentError
"""What a task gets back for one segment."""


def with_scores(texts: list[str], results: list[Any]) -> list[str]:
    """Each decoded text with its hypothesis's score (CTranslate2's `return_scores`)."""
    return [
        Scored(text, from_log_prob(r.scores[0]) if r.scores else None)
        for text, r in zip(texts, results, strict=True)
    ]


@dataclass(eq=False)
class Item:
    """One piece waiting in (or taken from) a batcher lane."""

    seq: int
    arrived: float
    request: Submission
    index: int
    slot: int
    tokens: list[str]
    taken: bool = False
    due: float = 0.0
    """When this piece's batch runs even if the budget is not full."""
    fast: bool = False
    """A piece of the interactive lane or of a small priority-9 request (stapel.broker
    URGENT_UP_TO): it waits for no company and heads a small batch."""
    key: str = ""
    """The hash of tokens (stapel.mtcache.piece_key): identical pieces share it."""
    priority: int = 0
    codec: Any = None
    """Its pair's codec (workers/families.py): how it is fed and decoded."""
    followers: list[Item] = field(default_factory=list)
    """Identical pieces of other requests that get this piece's translation (dedup)."""

    @property
    def size(self) -> int:
        return max(len(self.tokens), 1)


@dataclass
class _Segment:
    parts: list[Piece]
    texts: list[str | None]
    left: int
    error: SegmentError | None = None
    origins: set[str] = field(default_factory=set)
    """Where its pieces' translations came from (mt, cache, memory)."""
    scores: list[float | None] = field(default_factory=list)
    """Its translated pieces' scores (stapel.scores.combine makes the segment's)."""


@dataclass
class Planned:
    """A segment cut into pieces, with the tokens of each piece that needs translating."""

    index: int
    parts: list[Piece]
    tokens: list[list[str] | None] = field(default_factory=list)


def plan(
    work: list[tuple[int, str]],
    *,
    lang: str,
    split_sentences: bool,
    encode: Callable[[list[str]], list[list[str]]],
    limit: int,
) -> list[Planned]:
    """Cut each (index, text) into pieces of at most `limit` tokens (encode adds the suffix).

    Every piece is encoded once; only pieces over the limit are cut further, with a
    bisection of encodes over their break points.
    """
    planned = [
        Planned(index, segmentation.pieces(text, lang, split_sentences=split_sentences))
        for index, text in work
    ]
    flat = [p.text for seg in planned for p in seg.parts if p.text]
    encoded = iter(encode(flat)) if flat else iter(())

    def fits(text: str) -> bool:
        return len(encode([text])[0]) <= limit

    for seg in planned:
        parts: list[Piece] = []
        for part in seg.parts:
            tokens = next(encoded) if part.text else None
            if tokens is not None and len(tokens) > limit:
                bits = segmentation.cut(part, fits)
                parts.extend(bits)
                seg.tokens.extend(encode([b.text for b in bits]))
            else:
                parts.append(part)
                seg.tokens.append(tokens)
        seg.parts = parts
    return planned


class Submission:
    """One task's segments in the batcher; iterate it to receive translated batches."""

    def __init__(
        self,
        job_id: str | None,
        count: int,
        batcher: Lanes,
        tick_s: float | None = None,
    ) -> None:
        self.job_id = job_id
        self.remaining = count
        self.batcher = batcher
        self.tick_s = tick_s
        self.items: list[Item] = []
        """Every piece this submission put in the batcher (for a withdrawal)."""
        self.withdrawn = False
        self._segments: dict[int, _Segment] = {}
        self.origins: dict[int, str] = {}
        """Index -> "cache" or "mt" for each segment delivered with a translation."""
        self.scores: dict[int, float | None] = {}
        """Index -> score of each segment delivered with a translation (stapel.scores)."""
        self.learned: dict[str, str] = {}
        """Piece key -> translation, for the pieces the model translated (the cache's)."""
        self.held: list[str] = []
        """Keys of translations the batcher delivered here and keeps for identical pieces
        until release()."""
        self._lock = threading.Lock()
        # a SimpleQueue: a Queue's three conditions cost a one-segment job ~5% of its CPU
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        if count == 0:
            self._results.put(_DONE)

    def expect(self, planned: Planned) -> None:
        """Register a segment whose pieces will arrive through receive()."""
        texts: list[str | None] = [None if t is not None else "" for t in planned.tokens]
        left = sum(t is not None for t in planned.tokens)
        self._segments[planned.index] = _Segment(planned.parts, texts, left)

    def deliver(self, part: list[tuple[int, Result]]) -> None:
        """Hand finished segments to the task (dropped once it withdrew)."""
        if not part:
            return
        with self._lock:
            if self.withdrawn:
                return
            self._results.put(part)
            self.remaining -= len(part)
            if self.remaining <= 0:
                self._results.put(_DONE)

    def receive(self, pieces: list[tuple[Item, str | SegmentError]], origin: str = "mt") -> None:
        """Take translated (or failed) pieces; deliver the segments they complete.

        origin: where the pieces' translations come from: `mt` (the model), or `cache`
        or `memory` (answered at submit, never translated).
        """
        done: list[tuple[int, Result]] = []
        with self._lock:
            for item, out in pieces:
                seg = self._segments[item.index]
                if isinstance(out, SegmentError):
                    seg.error = seg.error or out
                else:
                    seg.texts[item.slot] = out
                    seg.origins.add(origin)
                    seg.scores.append(MEMORY_SCORE if origin == "memory" else score_of(out))
                    if origin == "mt" and item.key and isinstance(out, str):
                        self.learned[item.key] = out
                seg.left -= 1
                if seg.left == 0:
                    del self._segments[item.index]
                    if seg.error is None:
                        self.origins[item.index] = _origin(seg.origins)
                        self.scores[item.index] = combine(seg.scores)
                    done.append((item.index, seg.error or _joined(seg)))
        self.deliver(done)

    def take_learned(self) -> dict[str, str]:
        """Return and forget the model's new piece translations (to store in the cache)."""
        with self._lock:
            learned, self.learned = self.learned, {}
        return learned

    def release(self) -> None:
        """Let the batcher forget the translations it delivered here: call once they are
        written to the MT cache (or will not be). Until then an identical piece arriving
        rides on them instead of being translated again."""
        if self.batcher is not None:
            self.batcher.release(self)

    def fail(self, exc: BaseException) -> None:
        """Fail the whole submission: its task sees exc raised."""
        self._results.put(exc)

    def withdraw(self) -> None:
        """Take this submission's waiting pieces out of the batcher; drop what still comes."""
        with self._lock:
            self.withdrawn = True
        if self.batcher is not None:
            self.batcher.withdraw(self)
        self._results.put(_DONE)

    def __iter__(self) -> Iterator[list[tuple[int, Result]]]:
        """Yield finished parts; with tick_s, also an empty part after each quiet tick_s.

        The empty parts let a waiting task heartbeat and notice a cancel while its
        segments queue behind other work (see Batcher.progressing).
        """
        while True:
            try:
                part = self._results.get(timeout=self.tick_s)
            except queue.Empty:
                yield []
                continue
            if part is _DONE:
                return
            if isinstance(part, BaseException):
                raise part
            yield part


def _origin(origins: set[str]) -> str:
    """A segment's origin: mt if the model translated a piece of it, else cache if the
    cache answered one, else memory (every piece a human translation)."""
    for origin in ("mt", "cache", "memory"):
        if origin in origins:
            return origin
    return "mt"


def _joined(seg: _Segment):
    if len(seg.texts) == 1 and seg.texts[0] is not None and not isinstance(seg.texts[0], str):
        return seg.texts[0]  # one piece with more than its text (an aligned translation)
    texts = [t if isinstance(t, str) or t is None else t.text for t in seg.texts]
    return segmentation.join(seg.parts, [t or "" for t in texts])
