"""Auto-batching across jobs: one batcher thread per loaded model.

Tasks running at once on a worker submit their segments here; the batcher merges them
into shared batches. A batch runs when the waiting segments fill the token budget or
when the oldest of them has waited `wait_s`, whichever comes first (the `batch_size` /
`auto_batching_timeout` pair of serving pipelines). Segments are served by priority
(higher first), then in arrival order, so an old low-priority job is overtaken only by
higher-priority work, never by newer work of its own priority. Each request gets back
exactly its own segments, batch by batch, with their indexes.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import ctranslate2
import sentencepiece as spm

from app import metrics

log = logging.getLogger(__name__)

_DONE = object()


@dataclass(order=True)
class _Item:
    key: tuple[int, int]
    request: Request = field(compare=False)
    index: int = field(compare=False)
    tokens: list[str] = field(compare=False)


class Request:
    """One task's segments in the batcher; iterate it to receive translated batches."""

    def __init__(self, job_id: str | None, count: int, batcher: Batcher | None = None,
                 tick_s: float | None = None) -> None:
        self.job_id = job_id
        self.remaining = count
        self.batcher = batcher
        self.tick_s = tick_s
        self._results: queue.Queue = queue.Queue()
        if count == 0:
            self._results.put(_DONE)

    def _deliver(self, part: list[tuple[int, str]]) -> None:
        self._results.put(part)
        self.remaining -= len(part)
        if self.remaining <= 0:
            self._results.put(_DONE)

    def _fail(self, exc: BaseException) -> None:
        self._results.put(exc)

    def __iter__(self) -> Iterator[list[tuple[int, str]]]:
        """Yield translated parts; with tick_s, also an empty part after each quiet tick_s.

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


@dataclass
class BatchStats:
    """Counters a batcher keeps (for logs and metrics)."""

    batches: int = 0
    segments: int = 0
    padded_tokens: int = 0
    real_tokens: int = 0


class Batcher:
    """Merges segments of concurrent requests for one model into token-budget batches.

    `options` are passed to `Translator.translate_batch` (beam size, decoding lengths);
    `suffix` tokens end every source (`</s>` for Marian/OPUS-MT style models).
    """

    def __init__(
        self,
        translator: ctranslate2.Translator,
        source: spm.SentencePieceProcessor,
        target: spm.SentencePieceProcessor,
        *,
        budget: int,
        wait_s: float,
        options: dict,
        suffix: tuple[str, ...] = (),
        name: str = "",
    ) -> None:
        self.translator, self.source, self.target = translator, source, target
        self.budget, self.wait_s = budget, wait_s
        self.options = options
        self.suffix = list(suffix)
        self.name = name
        self.stats = BatchStats()
        self.last_progress = time.monotonic()
        self._heap: list[_Item] = []
        self._arrivals: deque[tuple[int, float]] = deque()
        self._taken: set[int] = set()
        self._pending_tokens = 0
        self._seq = itertools.count()
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"batcher-{name}", daemon=True)
        self._thread.start()

    def submit(self, items: list[tuple[int, str]], *, priority: int = 5,
               job_id: str | None = None, tick_s: float | None = None) -> Request:
        """Queue (index, text) items; blank texts come back at once, untranslated."""
        blank = [(i, t) for i, t in items if not t.strip()]
        work = [(i, t) for i, t in items if t.strip()]
        request = Request(job_id, len(items), self, tick_s)
        if blank:
            request._deliver(blank)
        if not work:
            return request
        encode_started = time.monotonic()
        tokens = [t + self.suffix for t in self.source.encode([t for _, t in work], out_type=str)]
        metrics.observe_stage("tokenize", time.monotonic() - encode_started)
        order = sorted(range(len(work)), key=lambda p: len(tokens[p]))
        now = time.monotonic()
        with self._cond:
            for p in order:
                seq = next(self._seq)
                heapq.heappush(self._heap, _Item((-priority, seq), request, work[p][0], tokens[p]))
                self._arrivals.append((seq, now))
                self._pending_tokens += max(len(tokens[p]), 1)
            self._cond.notify()
        return request

    def progressing(self, within_s: float) -> bool:
        """Return whether a batch finished, or the batcher was idle, within within_s."""
        with self._cond:
            idle = not self._heap
        return idle or time.monotonic() - self.last_progress < within_s

    def close(self) -> None:
        """Let the batcher thread exit once the queued segments are translated."""
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _oldest_arrival(self) -> float | None:
        while self._arrivals and self._arrivals[0][0] in self._taken:
            self._taken.discard(self._arrivals.popleft()[0])
        return self._arrivals[0][1] if self._arrivals else None

    def _next_batch(self) -> list[_Item] | None:
        with self._cond:
            while True:
                oldest = self._oldest_arrival()
                if oldest is None and self._closed:
                    return None
                if oldest is not None:
                    waited = time.monotonic() - oldest
                    if (self._pending_tokens >= self.budget or waited >= self.wait_s
                            or self._closed):
                        break
                    self._cond.wait(self.wait_s - waited)
                else:
                    self._cond.wait()
            batch: list[_Item] = []
            longest = 0
            while self._heap:
                size = max(len(self._heap[0].tokens), 1)
                if batch and (len(batch) + 1) * max(longest, size) > self.budget:
                    break
                item = heapq.heappop(self._heap)
                longest = max(longest, size)
                batch.append(item)
                self._taken.add(item.key[1])
                self._pending_tokens -= size
            return batch

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            try:
                self._translate(batch)
                self.last_progress = time.monotonic()
            except Exception as exc:  # hand any engine failure to the waiting tasks
                log.exception("batch failed model=%s", self.name)
                for request in {id(i.request): i.request for i in batch}.values():
                    request._fail(exc)

    def _translate(self, batch: list[_Item]) -> None:
        started = time.monotonic()
        results = self.translator.translate_batch([item.tokens for item in batch], **self.options)
        outputs = self.target.decode([r.hypotheses[0] for r in results])
        metrics.observe_stage("translate", time.monotonic() - started)
        parts: dict[int, tuple[Request, list[tuple[int, str]]]] = {}
        for item, text in zip(batch, outputs, strict=True):
            parts.setdefault(id(item.request), (item.request, []))[1].append((item.index, text))
        self._count(batch)
        jobs = sorted({str(r.job_id) for r, _ in parts.values()})
        level = logging.INFO if len(jobs) > 1 else logging.DEBUG
        log.log(level, "batch model=%s segments=%d jobs=%d logids=%s",
                self.name, len(batch), len(jobs), ",".join(jobs))
        for request, part in parts.values():
            request._deliver(part)

    def _count(self, batch: list[_Item]) -> None:
        longest = max(max(len(i.tokens), 1) for i in batch)
        real = sum(max(len(i.tokens), 1) for i in batch)
        self.stats.batches += 1
        self.stats.segments += len(batch)
        self.stats.padded_tokens += longest * len(batch)
        self.stats.real_tokens += real
        metrics.observe_batch(self.name, len(batch), real, longest * len(batch))
