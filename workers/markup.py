"""Segments with inline codes: the plain text is translated, the codes placed by alignment.

A segment from a document keeps its inline tags as markers (stapel/formats/inline.py).
The model never sees them: the engine hands such a request here, the markers are
stripped, the plain sentences go through an aligning batcher (the same batching as
every other segment, with CTranslate2's `return_attention`), and each translation gets
its source's codes back by word alignment (stapel/formats/align.py) before the task
writes it. The aligning batcher is a second batcher per loaded model, made on first
use; requests with no codes never reach it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from stapel import metrics
from stapel.formats import align, inline
from workers.batcher import Batcher, Submission, _Item

_lock = threading.Lock()


def has_codes(items: list[tuple[int, str]]) -> bool:
    """Whether any of the (index, text) items carries inline codes."""
    return any(inline.has_codes(text) for _, text in items)


class AligningBatcher(Batcher):
    """A batcher whose translations come back as align.Aligned (text, pieces, attention)."""

    def _translate(self, batch: list[_Item]) -> None:
        started = time.monotonic()
        results = self.translator.translate_batch(
            [item.tokens for item in batch], return_attention=True, **self.options
        )
        hypotheses = [r.hypotheses[0] for r in results]
        texts = self.target.decode(hypotheses)
        metrics.observe_stage("translate", time.monotonic() - started)
        cut = len(self.suffix)
        parts: dict[int, tuple[Submission, list]] = {}
        for item, text, hyp, result in zip(batch, texts, hypotheses, results, strict=True):
            pieces = item.tokens[: len(item.tokens) - cut]
            aligned = align.Aligned(text, pieces, hyp, result.attention[0])
            parts.setdefault(id(item.request), (item.request, []))[1].append((item.index, aligned))
        self._count(batch)
        for request, part in parts.values():
            request._deliver(part)


class TaggedSubmission:
    """A request's translations with their codes placed; iterates like a Submission."""

    def __init__(self, inner: Submission, sources: dict[int, str]) -> None:
        self.inner = inner
        self.batcher = inner.batcher
        self.sources = sources

    def __iter__(self) -> Iterator[list[tuple[int, str]]]:
        for part in self.inner:
            yield [(index, self._restore(index, result)) for index, result in part]

    def _restore(self, index: int, result: object) -> str:
        if isinstance(result, align.Aligned):
            return align.place(self.sources[index], result)
        return self.sources[index]  # no words to translate: the codes stay as they were


def aligner(model) -> Batcher:
    """Return the model's aligning batcher, made like its batcher on first use."""
    with _lock:
        if model.aligner is None:
            b = model.batcher
            model.aligner = AligningBatcher(
                model.translator,
                model.source,
                model.target,
                budget=b.budget,
                wait_s=b.wait_s,
                options=b.options,
                suffix=tuple(b.suffix),
                name=f"{model.pair}+align",
                parallel=b.parallel,
            )
        return model.aligner


def submit(
    model,
    items: list[tuple[int, str]],
    *,
    priority: int = 5,
    job_id: str | None = None,
    tick_s: float | None = None,
) -> TaggedSubmission:
    """Queue tagged (index, text) items: plain text to the aligner, codes put back after."""
    plain = [(index, inline.strip(text)) for index, text in items]
    inner = aligner(model).submit(plain, priority=priority, job_id=job_id, tick_s=tick_s)
    return TaggedSubmission(inner, dict(items))
