"""The interactive lane on a busy worker: a compat request is answered while a bulk job
runs, its chunk never handed back for room, and the bulk job loses nothing."""

from __future__ import annotations

import pytest
import requests
from sqlalchemy import func, select

from stapel.tables import Job, Segment
from tests.factories import sentences, wait_for

pytestmark = pytest.mark.e2e

BULK = 1000


def full_log(worker) -> str:
    return worker.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def live_overrides(live_overrides):
    # Chunks of 100 segments: the bulk job is 10 tasks fighting for the worker's room.
    return {**live_overrides, "chunk_segments": 100, "rate_submit": "off", "rate_read": "off"}


@pytest.fixture(scope="module")
def live_worker_env():
    # Room for one chunk: while the bulk job runs, every other chunk of it waits in the
    # worker's line for room (a lone worker hands nothing back: workers/budget.py).
    return {
        "STAPEL_WORKER_SEGMENTS": "10",
        "STAPEL_DEFER_S": "0.05",
        "STAPEL_MIN_DECODING_LENGTH": "24",
    }


def test_a_compat_request_is_answered_while_a_bulk_job_holds_the_worker(
    live, live_key, live_app, live_worker
):
    v1 = {"Authorization": f"Bearer {live_key}"}
    bulk = requests.post(
        f"{live}/v1/jobs",
        json={"source_lang": "en", "target_lang": "de", "segments": sentences(BULK)},
        headers=v1,
        timeout=30,
    ).json()
    client = live_app.extensions["stapel"].redis
    # Delivered to the worker and not acknowledged: the chunk it translates and the ones
    # waiting in its line for room (kombu's Redis transport keeps them in `unacked`).
    wait_for(
        lambda: client.hlen("unacked") >= 2,
        timeout=60,
        interval=0.01,
        what="bulk chunks waiting in the full worker's line for room",
    )
    answer = requests.post(
        f"{live}/libretranslate/translate",
        json={
            "q": ["Good day.", "The dog runs."],
            "source": "en",
            "target": "de",
            "api_key": live_key,
        },
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    state = requests.get(f"{live}/v1/jobs/{bulk['id']}", headers=v1, timeout=10).json()
    assert state["status"] == "running" and state["segments_done"] < BULK
    with live_app.extensions["stapel"].sessions() as s:
        (lane_job,) = s.scalars(select(Job).where(Job.api == "libretranslate")).all()
    assert lane_job.status == "succeeded" and lane_job.priority == 10
    assert f"chunk deferred: worker full logid={lane_job.id}" not in full_log(live_worker)

    # Invariant: the bulk job still ends with every segment written once.
    done = wait_for(
        lambda: (
            requests.get(f"{live}/v1/jobs/{bulk['id']}", headers=v1, timeout=10).json()
            if requests.get(f"{live}/v1/jobs/{bulk['id']}", headers=v1, timeout=10).json()["status"]
            in ("succeeded", "failed")
            else None
        ),
        timeout=300,
        what="the bulk job to end",
    )
    assert done["status"] == "succeeded" and done["segments_done"] == BULK
    with live_app.extensions["stapel"].sessions() as s:
        written = s.scalar(
            select(func.count()).where(Segment.job_id == bulk["id"], Segment.target.is_not(None))
        )
    assert written == BULK
