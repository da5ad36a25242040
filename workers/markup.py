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
from stapel.scores import from_log_prob
from workers.batcher import Batcher
from workers.families import Codec, decode_items, target_prefixes
from workers.submission import Item, Result, Submission

_lock = threading.Lock()


def has_codes(items: list[tuple[int, str]]) -> bool:
    """Whether any of the (index, text) items carries inline codes."""
    return any(inline.has_codes(text) for _, text in items)


class AligningBatcher(Batcher):
    """A batcher whose translations come back as align.Aligned (text, pieces, attention)."""

    def _translate(self, batch: list[Item]) -> list:
        started = time.monotonic()
        results = self.translator.translate_batch(
            [item.tokens for item in batch],
            return_attention=True,
            **target_prefixes(batch),
            **self.options,
        )
        hypotheses = [r.hypotheses[0] for r in results]
        texts = decode_items(batch, hypotheses, self.codec)
        metrics.observe_stage("translate", time.monotonic() - started)
        self._count(batch)
        out = []
        for item, text, hyp, result in zip(batch, texts, hypotheses, results, strict=True):
            codec = item.codec or self.codec
            head, cut, skip = len(codec.head), len(codec.suffix), len(codec.prefix)
            tokens = item.tokens[head : len(item.tokens) - cut]
            attention = [row[head : head + len(tokens)] for row in result.attention[0][skip:]]
            score = from_log_prob(result.scores[0]) if result.scores else None
            out.append(align.Aligned(text, tokens, hyp[skip:], attention, score))
        return out


class TaggedSubmission:
    """A request's translations with their codes placed; iterates like a Submission."""

    def __init__(self, inner: Submission, sources: dict[int, str]) -> None:
        self.inner = inner
        self.batcher = inner.batcher
        self.sources = sources

    @property
    def origins(self) -> dict[int, str]:
        return self.inner.origins

    @property
    def scores(self) -> dict[int, float | None]:
        """The plain text's scores: placing the codes does not change them."""
        return self.inner.scores

    def take_learned(self) -> dict[str, str]:
        """Nothing: a translation with its codes placed is not kept in the MT cache."""
        return {}

    def withdraw(self) -> None:
        """Take the request's waiting pieces out of the aligning batcher."""
        self.inner.withdraw()

    def release(self) -> None:
        """Nothing held: an aligned translation is never delivered to a later piece."""
        self.inner.release()

    def __iter__(self) -> Iterator[list[tuple[int, Result]]]:
        for part in self.inner:
            yield [(index, self._restore(index, result)) for index, result in part]

    def _restore(self, index: int, result: Result | align.Aligned) -> Result:
        source = self.sources[index]
        if isinstance(result, align.Aligned):
            return align.place(source, result)
        if not isinstance(result, str):
            return result  # a segment error: the task records it
        if not inline.strip(source).strip():
            return source  # no words to translate: the codes stay as they were
        return align.at_edges(source, result)


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
                memory_tokens=b.memory_tokens,
                wait_s=b.wait_s,
                options=b.options,
                suffix=tuple(b.suffix),
                name=f"{model.pair}+align",
                parallel=b.parallel,
                max_input_tokens=b.max_input_tokens,
                lang=b.lang,
                fingerprint=b.fingerprint,
            )
        return model.aligner


def submit(
    model,
    items: list[tuple[int, str]],
    *,
    priority: int = 5,
    job_id: str | None = None,
    tick_s: float | None = None,
    codec: Codec | None = None,
) -> TaggedSubmission:
    """Queue tagged (index, text) items: plain text to the aligner, codes put back after."""
    plain = [(index, inline.strip(text)) for index, text in items]
    # Units of documents are translated whole (their codes are placed over the whole
    # unit); only a unit over the model's input limit is cut, into pieces joined below.
    inner = aligner(model).submit(
        plain,
        priority=priority,
        job_id=job_id,
        tick_s=tick_s,
        split_sentences=False,
        codec=codec,
    )
    return TaggedSubmission(inner, dict(items))
