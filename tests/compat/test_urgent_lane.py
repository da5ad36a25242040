"""The job API's most urgent lane on a busy worker: a small /v1 job of priority 9 is
answered while a bulk job fills the worker's budget, not after one of its chunks ends,
and the bulk job loses nothing (workers/pipeline.py, URGENT_UP_TO)."""

from __future__ import annotations

import pytest
import requests
from sqlalchemy import func, select

from stapel.tables import Chunk, Job, Segment
from tests.factories import sentences, wait_for

pytestmark = pytest.mark.e2e

BULK = 1500
CHUNK = 500


@pytest.fixture(scope="module")
def live_overrides(live_overrides):
    # Three bulk chunks, each long enough (many batches) to tell "during" from "after".
    return {**live_overrides, "chunk_segments": CHUNK, "rate_submit": "off", "rate_read": "off"}


@pytest.fixture(scope="module")
def live_worker_env():
    # Room for one chunk: while a bulk chunk translates, the others wait in the worker's
    # line for room, and so would any other chunk that must take room.
    return {
        "STAPEL_WORKER_SEGMENTS": "10",
        "STAPEL_DEFER_S": "0.05",
        "STAPEL_MIN_DECODING_LENGTH": "64",
        "STAPEL_MAX_DECODING_LENGTH": "64",
    }


def ended(live: str, v1: dict, job_id: str) -> dict | None:
    """The job's status once it has ended, else None."""
    state = requests.get(f"{live}/v1/jobs/{job_id}", headers=v1, timeout=10).json()
    return state if state["status"] in ("succeeded", "failed", "cancelled") else None


def test_a_small_priority_9_job_does_not_wait_for_a_bulk_chunk_to_end(
    live, live_key, live_app, live_worker
):
    v1 = {"Authorization": f"Bearer {live_key}"}
    bulk = requests.post(
        f"{live}/v1/jobs",
        json={"source_lang": "en", "target_lang": "de", "segments": sentences(BULK, seed=9)},
        headers=v1,
        timeout=30,
    ).json()
    sessions = live_app.extensions["stapel"].sessions

    def running() -> str | None:
        with sessions() as s:
            return s.scalar(
                select(Chunk.id).where(Chunk.job_id == bulk["id"], Chunk.status == "running")
            )

    # A bulk chunk that has just started, with its segments ahead, holds the budget's
    # room; the rest of the bulk job waits in the worker's line.
    first = wait_for(running, timeout=60, interval=0.01, what="the first bulk chunk")
    fresh = wait_for(
        lambda: (chunk := running()) not in (None, first) and chunk,
        timeout=120,
        interval=0.005,
        what="the next bulk chunk to start",
    )
    urgent = requests.post(
        f"{live}/v1/jobs",
        json={"source_lang": "en", "target_lang": "de", "segments": ["Good day."], "priority": 9},
        headers=v1,
        timeout=30,
    ).json()
    answered = wait_for(
        lambda: ended(live, v1, urgent["id"]), timeout=120, interval=0.01, what="the urgent job"
    )
    assert answered["status"] == "succeeded"
    done = wait_for(lambda: ended(live, v1, bulk["id"]), timeout=300, what="the bulk job")
    with sessions() as s:
        chunk_end = s.get(Chunk, fresh).finished_at
        urgent_end = s.get(Job, urgent["id"]).finished_at
    assert urgent_end < chunk_end, "the urgent job waited for the bulk chunk to end"
    log = live_worker.log_path.read_text(errors="replace")
    assert f"chunk deferred: worker full logid={urgent['id']}" not in log

    # Invariant: the bulk job ends with every segment written once.
    assert done["status"] == "succeeded" and done["segments_done"] == BULK
    with sessions() as s:
        written = s.scalar(
            select(func.count()).where(Segment.job_id == bulk["id"], Segment.target.is_not(None))
        )
    assert written == BULK
