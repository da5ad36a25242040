"""A GPU worker's batcher keeps batches queued on the translator (asynchronous=True).

The path is the GPU's (workers/engine.py's PIPELINE_DEPTH on cuda); CTranslate2's
asynchronous translate_batch works on CPU as well, so it is tested here on the tiny
random model, the results held back at a gate the test opens.
"""

from __future__ import annotations

import threading

import pytest

from tests.factories import same_width, wait_for
from tests.workers.test_batcher import Recording, collect
from tests.workers.test_isolation import POISON, batcher_over
from workers.batcher import Batcher
from workers.engine import PIPELINE_DEPTH, Engine, pick_in_flight
from workers.submission import SegmentError


class HeldResults:
    """The real translator; the results of asynchronous calls wait for the test's gate."""

    def __init__(self, translator) -> None:
        self.translator = translator
        self.calls = 0
        self.open = threading.Event()

    def translate_batch(self, tokens, **options):
        assert options.get("asynchronous") is True
        self.calls += 1
        return [_Held(r, self.open) for r in self.translator.translate_batch(tokens, **options)]


class _Held:
    def __init__(self, result, gate: threading.Event) -> None:
        self.inner, self.gate = result, gate

    def result(self):
        self.gate.wait(timeout=60)
        return self.inner.result()


def test_batches_are_queued_ahead_and_each_request_gets_its_own_results(model_root):
    engine = Engine(model_root, max_decoding_length=8)
    loaded = engine.model("en-de")
    held = HeldResults(loaded.translator)
    width = len(loaded.batcher._encode(["ab"])[0])
    batcher = Batcher(
        held,
        loaded.source,
        loaded.target,
        budget=2 * width,  # two segments a batch
        wait_s=0.01,
        options=loaded.batcher.options,
        suffix=loaded.batcher.suffix,
        in_flight=2,
    )
    texts = same_width(batcher, 8)
    requests = [batcher.submit([(n, text)], job_id=str(n)) for n, text in enumerate(texts)]
    # no result has come back, yet two batches were handed to the translator: the next
    # batch is queued while the first decodes, and no third is cut before one returns
    wait_for(lambda: held.calls == 2, timeout=30, what="two batches queued")
    assert batcher.stats.batches == 0 and held.calls == 2
    held.open.set()
    got = collect(*requests)
    expected = engine.translate("en-de", texts)
    assert [dict(x for part in parts for x in part) for parts in got] == [
        {n: text} for n, text in enumerate(expected)
    ]
    assert batcher.stats.batches == held.calls == 4
    batcher.close()


def test_a_poison_piece_fails_alone_on_the_queued_path(model_root):
    """A batch whose results raise is bisected as on the synchronous path."""
    batcher, recording = batcher_over(model_root, wait_s=0.5, in_flight=2)
    assert isinstance(recording, Recording)
    reference = Engine(model_root, max_decoding_length=8)
    good = "we see green trees."
    a = batcher.submit([(0, POISON), (1, good)], job_id="a")
    b = batcher.submit([(0, good), (1, "the old man")], job_id="b")
    got_a, got_b = (dict(x for part in parts for x in part) for parts in collect(a, b))
    assert got_a[1] == got_b[0] == reference.translate("en-de", [good])[0]
    assert got_b[1] == reference.translate("en-de", ["the old man"])[0]
    assert isinstance(got_a[0], SegmentError) and got_a[0].code == "input_too_long"
    assert batcher.stats.failed_batches == 1 and batcher.stats.failed_pieces == 1


@pytest.mark.parametrize(("device", "queued"), [("cuda", PIPELINE_DEPTH), ("cpu", 0)])
def test_only_a_gpu_keeps_batches_queued(device, queued, model_root):
    assert pick_in_flight(device) == queued
    assert Engine(model_root, device="cpu").model("en-de").batcher.in_flight == 0
