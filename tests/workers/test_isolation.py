"""One request never hurts another inside the batcher: long, bad and cancelled segments.

Real CTranslate2 models throughout: the committed demo model (256 positions, trained on
sentences) for sentence splitting, the tiny random model for the rest.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.factories import same_width
from tests.workers.test_batcher import Gate, Recording, collect
from training.corpus import build_corpus
from workers.batcher import Batcher
from workers.engine import Engine
from workers.submission import SegmentError

DEMO_MODELS = Path(__file__).resolve().parents[2] / "models"


def demo_paragraph(chars: int) -> list[str]:
    """Held-out sentences of the demo grammar, enough to fill `chars` characters."""
    sentences, n = [], 40
    while len(" ".join(sentences)) < chars:
        n *= 2
        sentences = [e for e, _ in build_corpus(0, n, seed=0).test]
    out: list[str] = []
    while len(" ".join(out)) < chars:
        out.append(sentences[len(out)])
    return out


@pytest.fixture(scope="module")
def demo():
    return Engine(DEMO_MODELS, max_decoding_length=256, threads=2)


def test_a_5000_character_paragraph_is_translated_sentence_by_sentence(demo):
    sentences = demo_paragraph(5000)
    paragraph = " ".join(sentences)
    assert len(paragraph) >= 5000
    alone = demo.translate("en-de", sentences)
    (whole,) = demo.translate("en-de", [paragraph])
    assert whole == " ".join(alone)
    # Without splitting, the model (trained on sentences) loses most of it.
    (unsplit,) = demo.translate("en-de", [paragraph], split_sentences=False)
    assert len(unsplit) < len(whole) / 2


def test_the_source_whitespace_is_kept_around_each_sentence(demo):
    a, b = "The salesman has sat.", "You do not love him."
    ta, tb = demo.translate("en-de", [a, b])
    (joined,) = demo.translate("en-de", [f"  {a}\n\n{b}\t"])
    assert joined == f"  {ta}\n\n{tb}\t"


def test_a_sentence_over_the_input_limit_is_cut_not_crashed_on(demo):
    words = " ".join(["the", "old", "man", "sees", "the", "small", "dog"] * 120)
    loaded = demo.model("en-de")
    assert len(loaded.batcher._encode([words])[0]) > loaded.batcher.max_input_tokens == 256
    (out,) = demo.translate("en-de", [words])
    assert isinstance(out, str) and len(out) > 1000


def batcher_over(model_root, translator=None, **kwargs) -> tuple[Batcher, object]:
    loaded = Engine(model_root, max_decoding_length=8).model("en-de")
    inner = translator(loaded.translator) if translator else Recording(loaded.translator)
    defaults = {"budget": 100_000, "wait_s": 0.05, "max_input_tokens": 4096}
    batcher = Batcher(
        inner,
        loaded.source,
        loaded.target,
        options=loaded.batcher.options,
        suffix=loaded.batcher.suffix,
        name="en-de",
        **{**defaults, **kwargs},
    )
    return batcher, inner


POISON = "ba " * 550
"""One sentence of 1,100 tokens: over the random model's 1,024 positions. With the
input limit set above the model's real one (4,096), it reaches translate_batch whole."""


def test_a_poison_segment_fails_alone_and_the_rest_of_its_batch_is_delivered(model_root, caplog):
    # Segments as long as the poison (within the model's limit), so that the length-sorted
    # batch takes them together with it: a budget of 200k gives batches of up to 25k.
    batcher, recording = batcher_over(model_root, wait_s=1.0, budget=200_000)
    reference = Engine(model_root, max_decoding_length=8)
    others = {
        f"tenant{n}": [f"segment {n} {'ke ' * (480 + 5 * i)}" for i in range(4)] for n in range(3)
    }
    with caplog.at_level(logging.WARNING, logger="workers.batcher"):
        requests = [
            batcher.submit(list(enumerate(texts)), job_id=name) for name, texts in others.items()
        ]
        poison = batcher.submit([(0, "ke " * 470), (1, POISON)], job_id="poison")
        *parts, poison_parts = collect(*requests, poison)
    for (name, texts), got in zip(others.items(), parts, strict=True):
        assert dict(x for part in got for x in part) == dict(
            enumerate(reference.translate("en-de", texts))
        ), name
    poisoned = dict(x for part in poison_parts for x in part)
    assert poisoned[0] == reference.translate("en-de", ["ke " * 470])[0]
    assert isinstance(poisoned[1], SegmentError) and poisoned[1].code == "input_too_long"
    assert "tenant" not in poisoned[1].message  # nothing of the other jobs in its text
    (line,) = [r.getMessage() for r in caplog.records if "batch failed" in r.getMessage()]
    assert "logids=poison,tenant0,tenant1,tenant2" in line and "failed_logids=poison" in line
    assert len(recording.batches[0]) == 14  # all of them were in the first, failing batch


def test_a_poison_piece_in_two_jobs_fails_in_both_and_their_good_pieces_arrive(model_root):
    """Dedup in flight: the ride on a piece that fails alone fails the same way."""
    batcher, recording = batcher_over(model_root, wait_s=0.5)
    reference = Engine(model_root, max_decoding_length=8)
    good = "we see green trees."
    a = batcher.submit([(0, POISON), (1, good)], job_id="a")
    b = batcher.submit([(0, good), (1, POISON)], job_id="b")
    got_a, got_b = (dict(x for part in parts for x in part) for parts in collect(a, b))
    (expected,) = reference.translate("en-de", [good])
    assert got_a[1] == got_b[0] == expected
    assert isinstance(got_a[0], SegmentError) and isinstance(got_b[1], SegmentError)
    assert got_a[0].code == got_b[1].code == "input_too_long"
    assert len(recording.batches[0]) == 2  # each piece once, though two jobs hold it


class Broken:
    """A translator whose every call fails: an engine fault, not a bad input."""

    def translate_batch(self, tokens, **options):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")


def test_when_every_segment_fails_alone_the_tasks_see_the_engine_error(model_root):
    batcher, _ = batcher_over(model_root, translator=lambda _t: Broken())
    first = batcher.submit([(0, "one"), (1, "two")], job_id="a")
    second = batcher.submit([(0, "three")], job_id="b")
    for request in (first, second):
        with pytest.raises(RuntimeError, match="illegal memory access"):
            list(request)


def test_a_withdrawn_request_leaves_the_lanes_and_is_not_translated(model_root):
    loaded = Engine(model_root, max_decoding_length=8).model("en-de")
    gate = Gate(loaded.translator)
    recording = Recording(gate)
    width = len(loaded.batcher._encode(["ab"])[0])
    batcher = Batcher(
        recording,
        loaded.source,
        loaded.target,
        budget=4 * width,
        wait_s=0.01,
        options=loaded.batcher.options,
        suffix=loaded.batcher.suffix,
    )
    cancelled = batcher.submit(list(enumerate(same_width(batcher, 40))), job_id="cancelled")
    assert gate.wait_inside(1)  # its first batch of four is translating
    cancelled.withdraw()
    other = batcher.submit([(0, *same_width(batcher, 1))], job_id="other")
    gate.open.set()
    (got,) = collect(other)
    assert [i for part in got for i, _ in part] == [0]
    assert sum(len(b) for b in recording.batches) == 5  # the batch in flight, then `other`
    assert batcher.progressing(within_s=60) and batcher._pending_tokens == 0
    assert list(cancelled) == []  # its task stops iterating at once


def test_a_request_withdrawn_twice_returns_its_tokens_once(model_root):
    batcher, _ = batcher_over(model_root, wait_s=30)
    request = batcher.submit([(i, f"word {i}") for i in range(5)], job_id="x")
    keep = batcher.submit([(0, "stay")], job_id="y")
    before = batcher._pending_tokens
    request.withdraw()
    after_once = batcher._pending_tokens
    request.withdraw()
    assert after_once == batcher._pending_tokens < before
    assert batcher._pending_tokens == keep.items[0].size
    keep.withdraw()
    batcher.close()


def test_an_engine_fault_reaches_every_request_riding_on_the_batch(model_root):
    batcher, _ = batcher_over(model_root, translator=lambda _t: Broken())
    first = batcher.submit([(0, "one"), (1, "two")], job_id="a")
    second = batcher.submit([(0, "two"), (1, "one")], job_id="b")  # rides on the first's
    for request in (first, second):
        with pytest.raises(RuntimeError, match="illegal memory access"):
            list(request)
    assert batcher.stats.deduplicated == 2
