"""A pool's only consumer is gone while its work waits: the watchdog and /metrics say so."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.factories import wait_for
from tests.faults.harness import DEADLINE_S

pytestmark = [pytest.mark.fault, pytest.mark.slow]

LINE = "queued work has no live consumer pool=cpu"


def unserved(stack) -> dict[str, float]:
    text = stack.client.get("/metrics").get_data(as_text=True)
    return {
        s.labels["pool"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "stapel_queued_unserved_chunks"
    }


def test_queued_work_without_a_consumer_is_reported_until_one_starts(make_stack, reference, report):
    """Only a control worker runs (as after the cpu worker died): the cpu job waits; the
    watchdog writes a warning per pass naming the pool, /metrics shows the chunks; once a
    cpu worker starts the job succeeds and the gauge is 0 again."""
    stack = make_stack()
    watch = stack.worker("watch", concurrency=1, queues="control")
    stack.start_beat()
    ids = stack.submit([12])

    wait_for(
        lambda: LINE in watch.full_log(),
        timeout=DEADLINE_S,
        interval=0.3,
        what="the watchdog to report the unserved pool",
    )
    assert unserved(stack)["cpu"] == 1
    assert stack.jobs(ids)[ids[0]].status == "queued"

    stack.start("cpu", beat=False)
    stack.wait_done(ids)
    figures = stack.verify("unserved_pool", ids, reference)
    report(figures)
    assert figures.succeeded == 1
    assert unserved(stack) == {"cpu": 0, "gpu": 0}
