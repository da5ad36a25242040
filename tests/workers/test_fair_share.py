"""Fair share reaches the batcher: a worker serves the priority the chunk was sent with.

Two tenants' chunks are held on one worker at once, the flooding tenant's first. Its jobs
all asked for priority 9, but from its sixth job in flight on fair share sent them at 8
and below; the other tenant's one job, also asking 9, was sent at 9. Inside the worker's
batcher it must come before the flood's later jobs (the batcher used to serve the
requested 9 of all of them, first come first served, so it came last).
"""

from __future__ import annotations

import logging
import re

from sqlalchemy import select

from stapel.chunks import claim_chunk, pending_segments
from stapel.tables import Chunk
from tests.factories import job_body, same_width
from tests.workers.test_batcher import Gate, Recording
from workers.batcher import Batcher
from workers.engine import Engine


def claim_job(sessions, job_id: str):
    with sessions() as s:
        chunk_id = s.scalar(select(Chunk.id).where(Chunk.job_id == job_id))
        claim = claim_chunk(s, chunk_id, "w@test")
        return claim, pending_segments(s, claim)


def test_the_batcher_serves_the_effective_priority_of_two_tenants_chunks(
    app, client, auth, other_key, model_root, caplog
):
    sessions = app.extensions["stapel"].sessions
    step = app.extensions["stapel"].settings.fair_share_step
    loaded = Engine(model_root, max_decoding_length=8).model("en-de")
    # texts of one width, each its own: identical pieces in flight would be translated once
    texts = iter(same_width(loaded.batcher, 2 * (3 * step + 1)))
    flood = [
        client.post(
            "/v1/jobs", headers=auth, json=job_body([next(texts), next(texts)], priority=9)
        ).get_json()
        for _ in range(3 * step)
    ]
    other = client.post(
        "/v1/jobs",
        headers={"Authorization": f"Bearer {other_key}"},
        json=job_body([next(texts), next(texts)], priority=9),
    ).get_json()

    gate = Gate(loaded.translator)
    width = len(loaded.batcher._encode(["ab"])[0])
    batcher = Batcher(
        Recording(gate),
        loaded.source,
        loaded.target,
        budget=2 * width,  # one job's two segments per batch
        wait_s=0.01,
        options=loaded.batcher.options,
        suffix=loaded.batcher.suffix,
        name="en-de",
    )
    claims = [claim_job(sessions, job["id"]) for job in [*flood, other]]
    assert [c.priority for c, _ in claims] == [9] * step + [8] * step + [7] * step + [9]
    with caplog.at_level(logging.DEBUG, logger="workers.batcher"):
        requests = []
        for claim, pending in claims:  # as the pipeline does, one task per chunk
            requests.append(batcher.submit(pending, priority=claim.priority, job_id=claim.job_id))
            if len(requests) == 1:
                assert gate.wait_inside(1)  # the first batch is translating: the rest wait
        gate.open.set()
        for request in requests:
            assert sum(len(part) for part in request) == 2
    batches = [
        m.group(1)
        for r in caplog.records
        if (m := re.match(r"batch model=en-de segments=\d+ jobs=1 logids=(\S+)", r.getMessage()))
    ]
    # a small priority-9 job heads batches of a fraction of the budget (one segment here)
    served = [job for n, job in enumerate(batches) if n == 0 or batches[n - 1] != job]
    order = [job["id"] for job in [*flood[:step], other, *flood[step:]]]
    assert served == order
