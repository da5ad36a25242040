"""The batcher's interactive lane: above every job, no wait for company, small batches;
and a small priority-9 request, which takes the same short cuts below it."""

from __future__ import annotations

import threading
import time

from stapel.broker import INTERACTIVE_PRIORITY, URGENT_UP_TO
from tests.factories import same_width
from workers.batcher import INTERACTIVE_BUDGET_DIV
from workers.engine import Engine


def timed(*requests):
    """Iterate each request in its own thread; return [(arrival time, part)] per request."""
    out: list[list] = [[] for _ in requests]

    def consume(k, request):
        out[k] = [(time.monotonic(), part) for part in request]

    threads = [threading.Thread(target=consume, args=kr, daemon=True) for kr in enumerate(requests)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a request was not served"
    return out


def batcher(model_root, wait_s: float, parallel: int = 2):
    engine = Engine(
        model_root, max_decoding_length=8, batch_wait_s=wait_s, parallel_batches=parallel
    )
    return engine.model("en-de").batcher


def test_the_lane_goes_first_in_a_batch_of_its_own_size(model_root):
    b = batcher(model_root, wait_s=0.5)
    width = len(b.source.encode("ab", out_type=str)) + len(b.suffix)
    b.budget = 2 * INTERACTIVE_BUDGET_DIV * width  # a lane batch holds two "ab"
    high = b.submit(list(enumerate(same_width(b, 10))), priority=8, job_id="high")
    lane = b.submit(list(enumerate(same_width(b, 2))), priority=INTERACTIVE_PRIORITY, job_id="lane")
    got_high, got_lane = timed(high, lane)
    assert [len(part) for _, part in got_lane] == [2]
    assert sum(len(part) for _, part in got_high) == 10
    assert b.stats.batches == 1 + len(got_high)  # none of them rode in the lane's batch
    assert got_lane[0][0] < min(at for at, _ in got_high)


def test_the_lane_does_not_wait_for_company_and_shares_its_batch(model_root):
    # One batch at a time (with two, the lane's segment and the job's would each get a
    # free thread's share); the job's lone segment alone would wait an hour.
    b = batcher(model_root, wait_s=3600, parallel=1)
    job = b.submit([(0, *same_width(b, 1))], priority=5, job_id="job")
    lane = b.submit([(0, *same_width(b, 1))], priority=INTERACTIVE_PRIORITY, job_id="lane")
    got_job, got_lane = timed(job, lane)
    assert [len(part) for _, part in got_lane] == [1] and [len(p) for _, p in got_job] == [1]
    assert b.stats.batches == 1  # the job's segment rode along in the lane's batch


def test_a_small_priority_9_request_waits_for_no_company(model_root):
    b = batcher(model_root, wait_s=3600, parallel=1)  # a priority-8 one would wait an hour
    urgent = b.submit([(0, *same_width(b, 1))], priority=9, job_id="urgent")
    (got,) = timed(urgent)
    assert [len(part) for _, part in got] == [1]


def test_small_priority_9_requests_get_small_batches_and_large_ones_full_ones(model_root):
    b = batcher(model_root, wait_s=0.05)
    width = len(b.source.encode("ab", out_type=str)) + len(b.suffix)
    b.budget = 2 * INTERACTIVE_BUDGET_DIV * width  # a full batch holds 16 "ab", a small 2
    small = b.submit(list(enumerate(same_width(b, 8))), priority=9, job_id="small")
    (got_small,) = timed(small)
    assert [len(part) for _, part in got_small] == [2, 2, 2, 2]
    large = b.submit(list(enumerate(same_width(b, URGENT_UP_TO + 1))), priority=9, job_id="large")
    (got_large,) = timed(large)
    assert max(len(part) for _, part in got_large) == 2 * INTERACTIVE_BUDGET_DIV
