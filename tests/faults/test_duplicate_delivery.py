"""Every chunk task delivered three times at once: each chunk is claimed and written once."""

from __future__ import annotations

import time

import pytest

from stapel.broker import send_chunk
from stapel.dispatch import ChunkMessage
from stapel.tables import new_id
from tests.factories import wait_for
from tests.faults.harness import DEADLINE_S

pytestmark = [pytest.mark.fault, pytest.mark.slow]


def test_duplicate_deliveries_write_each_segment_once(make_stack, reference, report):
    stack = make_stack(chunk_segments=100)
    stack.start("a", "b")
    ids = stack.submit([300, 300, 300, 300])
    messages = [
        ChunkMessage(c.id, c.job_id, c.pool, 5, c.pool, c.end_segment - c.first_segment)
        for j in ids
        for c in stack.chunks(j)
    ]
    sent_at = time.monotonic()
    for _ in range(2):  # two more copies of every task, sent at once
        assert all(send_chunk(stack.celery, m, new_id()) for m in messages)

    finished_at = stack.wait_done(ids)
    wait_for(
        lambda: stack.logs().count("chunk not claimable") >= 2 * len(messages),
        timeout=DEADLINE_S,
        what="every duplicate to be delivered and skipped",
    )
    figures = stack.verify("duplicate_delivery", ids, reference)
    figures.recover_s = round(finished_at - sent_at, 2)
    figures.notes = {
        "chunks": len(messages),
        "deliveries": 3 * len(messages),
        "skipped": stack.logs().count("chunk not claimable"),
    }
    report(figures)

    assert figures.succeeded == len(ids), stack.logs()[-4000:]
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    assert figures.claims == len(messages) and figures.attempts_max == 1
    assert {c.attempts for j in ids for c in stack.chunks(j)} == {1}
