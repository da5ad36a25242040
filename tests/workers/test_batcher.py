"""The batcher: segments of concurrent requests share batches, by priority then arrival."""

from __future__ import annotations

import threading

import pytest

from tests.factories import same_width
from workers.batcher import Batcher, Request
from workers.engine import Engine


@pytest.fixture
def model(model_root):
    engine = Engine(model_root, max_decoding_length=12, batch_tokens=10_000, batch_wait_s=0.5)
    return engine, engine.model("en-de")


def consume(request, into: dict, key):
    into[key] = [part for part in request]


def collect(*requests):
    """Iterate every request in its own thread, as worker tasks do; return their parts."""
    out: dict = {}
    threads = [threading.Thread(target=consume, args=(r, out, k)) for k, r in enumerate(requests)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return [out[k] for k in range(len(requests))]


def test_concurrent_requests_share_one_batch_and_get_their_own_results(model):
    engine, loaded = model
    texts_a = [f"alpha {i} {'x ' * i}" for i in range(5)]
    texts_b = [f"beta {i}" for i in range(3)]
    alone_a = engine.translate("en-de", texts_a)
    alone_b = engine.translate("en-de", texts_b)
    before = loaded.batcher.stats.batches
    a = loaded.batcher.submit(list(enumerate(texts_a)), job_id="A")
    b = loaded.batcher.submit([(10 + i, t) for i, t in enumerate(texts_b)], job_id="B")
    parts_a, parts_b = collect(a, b)
    assert loaded.batcher.stats.batches - before == 1
    assert dict(x for part in parts_a for x in part) == dict(enumerate(alone_a))
    assert dict(x for part in parts_b for x in part) == {10 + i: t for i, t in enumerate(alone_b)}


def tiny_budget(model_root, wait_s=0.5):
    """An engine whose batches hold about three short segments."""
    engine = Engine(model_root, max_decoding_length=8, batch_tokens=12, batch_wait_s=wait_s)
    loaded = engine.model("en-de")
    width = len(loaded.source.encode("ab", out_type=str)) + len(loaded.batcher.suffix)
    loaded.batcher.budget = 3 * width
    return loaded.batcher


def test_higher_priority_overtakes_waiting_lower(model_root):
    batcher = tiny_budget(model_root)
    low = batcher.submit(list(enumerate(same_width(batcher, 2))), priority=1, job_id="low")
    high = batcher.submit(list(enumerate(same_width(batcher, 2))), priority=8, job_id="high")
    parts_low, parts_high = collect(low, high)
    assert [len(p) for p in parts_high] == [2]  # all in the first batch
    assert [len(p) for p in parts_low] == [1, 1]  # one squeezed in, one in the next batch


def test_same_priority_is_first_come_first_served(model_root):
    batcher = tiny_budget(model_root)
    first = batcher.submit(list(enumerate(same_width(batcher, 2))), priority=5, job_id="first")
    second = batcher.submit(list(enumerate(same_width(batcher, 2))), priority=5, job_id="second")
    parts_first, parts_second = collect(first, second)
    assert [len(p) for p in parts_first] == [2]
    assert [len(p) for p in parts_second] == [1, 1]


def test_blank_only_request_needs_no_batch(model):
    _, loaded = model
    before = loaded.batcher.stats.batches
    (parts,) = collect(loaded.batcher.submit([(0, ""), (1, " ")]))
    assert parts == [[(0, ""), (1, " ")]]
    assert loaded.batcher.stats.batches == before


def test_closed_batcher_finishes_queued_work(model):
    _, loaded = model
    request = loaded.batcher.submit([(0, "hello"), (1, "world")])
    loaded.batcher.close()
    (parts,) = collect(request)
    assert sorted(i for part in parts for i, _ in part) == [0, 1]


def test_waiting_request_ticks_so_its_task_can_heartbeat(model_root):
    engine = Engine(model_root, max_decoding_length=8, batch_tokens=10_000, batch_wait_s=0.5)
    batcher = engine.model("en-de").batcher
    parts = list(batcher.submit([(0, "hello"), (1, "there")], tick_s=0.05))
    assert parts[0] == []  # nothing yet: the batch waits up to wait_s for company
    assert sorted(i for part in parts for i, _ in part) == [0, 1]
    assert batcher.progressing(within_s=60)


class Recording:
    """The real translator, remembering the source lengths of every batch it ran."""

    def __init__(self, translator) -> None:
        self.translator = translator
        self.batches: list[list[int]] = []

    def translate_batch(self, tokens, **options):
        self.batches.append([len(t) for t in tokens])
        return self.translator.translate_batch(tokens, **options)


def recording_batcher(model_root, budget_of, wait_s=0.5):
    """A batcher over the real en-de model whose budget is budget_of(width of a text)."""
    loaded = Engine(model_root, max_decoding_length=8).model("en-de")
    recording = Recording(loaded.translator)
    suffix = loaded.batcher.suffix

    def width(text: str) -> int:
        return len(loaded.source.encode(text, out_type=str)) + len(suffix)

    batcher = Batcher(
        recording,
        loaded.source,
        loaded.target,
        budget=budget_of(width),
        wait_s=wait_s,
        options=loaded.batcher.options,
        suffix=suffix,
    )
    return batcher, recording, width


LONG, SHORT = "the green house on the hill by the river", "yes"


def test_batches_group_similar_lengths_across_jobs(model_root):
    batcher, recording, width = recording_batcher(model_root, lambda w: 2 * w(LONG))
    longs, shorts = same_width(batcher, 2, LONG), same_width(batcher, 2, SHORT)
    requests = [
        batcher.submit([(0, text)], job_id=str(n))
        for n, text in enumerate([longs[0], shorts[0], longs[1], shorts[1]])
    ]
    collect(*requests)
    # In arrival order the batches would be long+short twice, padded to the long width.
    assert recording.batches == [[width(LONG)] * 2, [width(SHORT)] * 2]
    assert batcher.stats.padded_tokens == batcher.stats.real_tokens


def test_oldest_segment_is_in_the_next_batch_even_among_shorter_ones(model_root):
    batcher, recording, width = recording_batcher(model_root, lambda w: 3 * w(SHORT))
    first = batcher.submit([(0, LONG)], job_id="old")
    later = [
        batcher.submit([(0, text)], job_id=str(n))
        for n, text in enumerate(same_width(batcher, 6, SHORT))
    ]
    collect(first, *later)
    assert width(LONG) in recording.batches[0]
    assert sorted(size for batch in recording.batches for size in batch) == sorted(
        [width(SHORT)] * 6 + [width(LONG)]
    )


class Gate:
    """The real translator behind a gate: each call waits until the test opens it."""

    def __init__(self, translator) -> None:
        self.translator = translator
        self.inside = 0
        self.most_inside = 0
        self.cond = threading.Condition()
        self.open = threading.Event()

    def translate_batch(self, tokens, **options):
        with self.cond:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
            self.cond.notify_all()
        self.open.wait(timeout=60)
        try:
            return self.translator.translate_batch(tokens, **options)
        finally:
            with self.cond:
                self.inside -= 1

    def wait_inside(self, n: int, timeout: float = 30) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.inside >= n, timeout=timeout)


def gated_batcher(model_root, parallel: int, widths: int = 1):
    """A batcher over the real model, translating behind a gate and recording its batches.

    Its budget holds `widths` segments "ab" (one-segment batches by default).
    """
    loaded = Engine(model_root, max_decoding_length=8).model("en-de")
    gate = Gate(loaded.translator)
    recording = Recording(gate)
    width = len(loaded.source.encode("ab", out_type=str)) + len(loaded.batcher.suffix)
    batcher = Batcher(
        recording,
        loaded.source,
        loaded.target,
        budget=widths * width,
        wait_s=0.01,
        options=loaded.batcher.options,
        suffix=loaded.batcher.suffix,
        parallel=parallel,
    )
    return batcher, gate, recording


@pytest.mark.parametrize("parallel", [1, 2, 3])
def test_parallel_batches_translate_at_once(model_root, parallel):
    batcher, gate, _ = gated_batcher(model_root, parallel)
    requests = [batcher.submit([(0, *same_width(batcher, 1))], job_id=str(n)) for n in range(4)]
    assert gate.wait_inside(parallel)
    gate.open.set()
    parts = collect(*requests)
    assert gate.most_inside == parallel
    assert all(sum(len(p) for p in got) == 1 for got in parts)
    assert batcher.stats.batches == 4


def test_a_hung_batch_stops_progress_while_another_thread_runs(model_root):
    batcher, gate, _ = gated_batcher(model_root, 2)
    batcher.submit([(0, *same_width(batcher, 1))], job_id="hung")
    batcher.submit([(0, *same_width(batcher, 1))], job_id="waiting")
    assert gate.wait_inside(2)
    assert batcher.progressing(within_s=30)
    assert not batcher.progressing(within_s=0)  # both batches are older than that
    gate.open.set()


def test_the_last_work_is_shared_between_free_threads(model_root):
    """Eight equal segments, room for sixteen: two batches of four run side by side."""
    batcher, gate, recording = gated_batcher(model_root, 2, widths=16)
    request = batcher.submit(list(enumerate(same_width(batcher, 8))), job_id="burst")
    assert gate.wait_inside(2)
    gate.open.set()
    collect(request)
    assert sorted(map(len, recording.batches)) == [4, 4]
    assert gate.most_inside == 2


def test_memory_bound_cuts_rows_by_source_plus_output_and_keeps_the_output(model_root):
    """At a long output length, many short sources are what cost memory: the batch's rows
    are bounded by memory_tokens / (longest source + output), the translations unchanged."""
    texts = [f"word {i} {'y ' * (i % 4)}" for i in range(40)]
    free = Engine(model_root, max_decoding_length=12, batch_tokens=10_000, batch_wait_s=0.5)
    bounded = Engine(
        model_root,
        max_decoding_length=12,
        batch_tokens=10_000,
        batch_wait_s=0.5,
        batch_memory_tokens=200,
    )
    expected = free.translate("en-de", texts)
    assert free.model("en-de").batcher.stats.batches == 1
    batcher = bounded.model("en-de").batcher
    shortest = min(len(batcher._encode([t])[0]) for t in texts)  # with the suffix
    assert bounded.translate("en-de", texts) == expected
    most_rows = 200 // (shortest + 12)  # what a batch of the shortest sources may hold
    assert batcher.stats.batches >= -(-len(texts) // most_rows) > 1
    assert batcher.stats.segments == len(texts)


@pytest.mark.parametrize(
    ("max_len", "min_len", "size", "rows"),
    [
        (256, 0, 10, 1000 // (10 + 36)),  # an ordinary model: twice the source + 16
        (256, 0, 200, 1000 // (200 + 256)),  # never more than the maximum length
        (256, 256, 10, 1000 // (10 + 256)),  # a minimum length is decoded whatever
        (12, 0, 10, 1000 // (10 + 12)),
        (256, 0, 2000, 1),  # one row however long
    ],
)
def test_memory_bound_counts_the_expected_output_within_the_decoding_lengths(
    model_root, max_len, min_len, size, rows
):
    engine = Engine(
        model_root,
        max_decoding_length=max_len,
        min_decoding_length=min_len,
        batch_memory_tokens=1000,
    )
    assert engine.model("en-de").batcher._rows(size) == rows


def test_identical_pieces_in_flight_are_translated_once_for_every_request(model_root):
    """Dedup in flight: across requests (jobs) and within one, each gets its own result."""
    batcher, recording, _width = recording_batcher(model_root, lambda w: 10_000)
    shared, own = "the dog runs today.", "she reads books."
    alone = Engine(model_root, max_decoding_length=8).translate("en-de", [shared, own])
    a = batcher.submit([(0, shared), (1, own), (2, shared)], job_id="a")
    b = batcher.submit([(5, shared)], job_id="b")
    parts_a, parts_b = collect(a, b)
    assert dict(x for part in parts_a for x in part) == {0: alone[0], 1: alone[1], 2: alone[0]}
    assert dict(x for part in parts_b for x in part) == {5: alone[0]}
    assert sum(len(batch) for batch in recording.batches) == 2  # shared once, own once
    assert batcher.stats.deduplicated == 2


def test_a_piece_delivered_and_not_yet_released_is_not_translated_again(model_root):
    """Between a piece's delivery and its request's cache write (release), an identical
    piece rides on the delivered translation; once its owner released it, it is
    translated anew (the MT cache answers it in a worker: workers.pipeline)."""
    batcher, recording, _width = recording_batcher(model_root, lambda w: 10_000, wait_s=0.01)
    text = "the red car stops today."
    first = batcher.submit([(0, text)], job_id="first")
    (got_first,) = collect(first)
    second = batcher.submit([(3, text)], job_id="second")
    (got_second,) = collect(second)
    assert [t for part in got_second for _, t in part] == [t for part in got_first for _, t in part]
    assert len(recording.batches) == 1 and second.origins == {3: "mt"}
    assert batcher.stats.deduplicated == 1
    second.release()  # a rider owns nothing: the first's translation is still held
    collect(batcher.submit([(0, text)], job_id="third"))
    assert len(recording.batches) == 1
    first.release()
    collect(batcher.submit([(0, text)], job_id="fourth"))
    assert len(recording.batches) == 2 and batcher._delivered  # the fourth's, until released


def test_engine_translate_releases_what_it_was_delivered(model_root):
    engine = Engine(model_root, max_decoding_length=8, batch_wait_s=0.01)
    engine.translate("en-de", ["one more day.", "two birds sing."])
    assert engine.model("en-de").batcher._delivered == {}


def test_a_withdrawn_request_leaves_its_rides_translated_for_the_others(model_root):
    batcher, recording, _width = recording_batcher(model_root, lambda w: 10_000, wait_s=0.5)
    text = "we see green trees."
    expected = Engine(model_root, max_decoding_length=8).translate("en-de", [text])
    first = batcher.submit([(0, text)], job_id="first")
    second = batcher.submit([(0, text)], job_id="second")
    first.withdraw()  # long before the batch is due: its piece stays, the second rides on it
    (parts,) = collect(second)
    assert [text for part in parts for _, text in part] == expected
    assert list(first) == [] and len(recording.batches) == 1


def test_requests_submitted_together_get_what_each_would_alone(model):
    """submit_many encodes its requests' texts in one call and queues them under one lock;
    each request still gets its own segments back, blanks and long ones included."""
    engine, loaded = model
    long = " ".join(f"word{i}" for i in range(300))  # cut into pieces at the input limit
    texts = [["one small thing", "", long], ["a house", "one small thing"], ["  "]]
    alone = [engine.translate("en-de", t) for t in texts]
    requests = [Request([(10 * n + i, t) for i, t in enumerate(ts)]) for n, ts in enumerate(texts)]
    before = loaded.batcher.stats.batches
    submitted = loaded.batcher.submit_many(requests)
    got = [dict(x for part in parts for x in part) for parts in collect(*submitted)]
    assert loaded.batcher.stats.batches - before <= 2  # shared batches, not one per request
    assert got == [{10 * n + i: t for i, t in enumerate(a)} for n, a in enumerate(alone)]
