"""One dispatch: every path that sends a chunk gives it the same queue and priority."""

from __future__ import annotations

import base64
import json
import types
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from stapel import settings as settings_module
from stapel.broker import broker_priority
from stapel.chunks import claim_chunk
from stapel.presence import publish
from stapel.tables import Chunk, Job, utcnow
from tests.factories import job_body
from workers import control, pipeline, runtime

QUEUES = ("cpu", "gpu", "cpu.en-de")


def waiting_messages(client) -> list[dict]:
    """Return every task message waiting in the queues: chunk id, queue, broker priority."""
    found = []
    for queue in QUEUES:
        for step in range(10):
            key = queue if step == 0 else f"{queue}:{step}"
            for raw in client.lrange(key, 0, -1):
                message = json.loads(raw)
                found.append(
                    {
                        "chunk_id": json.loads(_body(message))[0][0],
                        "queue": message["properties"]["delivery_info"]["routing_key"],
                        "priority": message["properties"]["priority"],
                    }
                )
    return found


def _body(message: dict) -> str:
    return base64.b64decode(message["body"]).decode()


def drain(client) -> list[dict]:
    """Return the waiting messages and empty the queues."""
    found = waiting_messages(client)
    for queue in QUEUES:
        client.delete(queue, *[f"{queue}:{step}" for step in range(1, 10)])
    return found


@pytest.fixture
def stack(app, client, auth, redis_client, monkeypatch, settings_overrides):
    """A tenant with a job whose fair-share priority is below its requested one.

    The fair-share step is 1, so the third job of a tenant with two in flight is sent
    at 9 - 2 = 7; a cpu worker holds en-de, so its chunks go to `cpu.en-de`.
    """
    ext = app.extensions["stapel"]
    ext.settings = ext.settings.replace(fair_share_step=1, chunk_segments=1)
    publish(
        redis_client, "cpu-1@test", {"pool": "cpu", "models": ["en-de"], "busy": 0, "budget": 4000}
    )
    for _ in range(2):
        client.post("/v1/jobs", json=job_body(priority=9), headers=auth)
    drain(redis_client)
    job = client.post(
        "/v1/jobs", json=job_body(["One.", "Two."], priority=9), headers=auth
    ).get_json()
    for name, value in (
        ("DATABASE_URL", settings_overrides["database_url"]),
        ("REDIS_URL", settings_overrides["redis_url"]),
        ("STAPEL_MODEL_ROOT", str(settings_overrides["model_root"])),
    ):
        monkeypatch.setenv(name, value)
    settings_module.current.cache_clear()
    runtime.state.cache_clear()
    yield types.SimpleNamespace(ext=ext, job=job, redis=redis_client)
    settings_module.current.cache_clear()
    runtime.state.cache_clear()


def expected(stack) -> list[dict]:
    with stack.ext.sessions() as s:
        ids = s.scalars(select(Chunk.id).where(Chunk.job_id == stack.job["id"])).all()
    return sorted(
        ({"chunk_id": c, "queue": "cpu.en-de", "priority": broker_priority(7)} for c in ids),
        key=lambda m: m["chunk_id"],
    )


def sorted_messages(messages: list[dict]) -> list[dict]:
    return sorted(messages, key=lambda m: m["chunk_id"])


def test_submit_stores_the_fair_share_priority_and_routes_to_the_model_queue(stack):
    with stack.ext.sessions() as s:
        job = s.get(Job, stack.job["id"])
        assert (job.priority, job.dispatch_priority) == (9, 7)
    assert sorted_messages(drain(stack.redis)) == expected(stack)


def test_operator_requeue_sends_the_same_messages(stack, runner, client, auth):
    drain(stack.redis)
    client.post(stack.job["links"]["cancel"], headers=auth)
    result = runner.invoke(args=["jobs", "requeue", stack.job["id"]])
    assert result.exit_code == 0, result.output
    assert sorted_messages(drain(stack.redis)) == expected(stack)


def test_watchdog_resend_sends_the_same_messages(stack):
    drain(stack.redis)  # the broker lost them (a Redis restart)
    past = utcnow() - timedelta(minutes=5)
    with stack.ext.sessions() as s:
        s.execute(
            update(Chunk)
            .where(Chunk.job_id == stack.job["id"])
            .values(created_at=past, sent_at=past)
        )
        s.commit()
    assert "resent=2" in control.run_watchdog(stack.ext.celery)
    assert sorted_messages(drain(stack.redis)) == expected(stack)


def test_worker_hand_back_sends_the_same_message_to_the_pool_queue(stack):
    (first, *_rest) = expected(stack)
    drain(stack.redis)
    state = runtime.state()
    with state.sessions() as session:
        outcome = pipeline._hand_back(state, stack.ext.celery, session, first["chunk_id"])
    assert outcome == "deferred"
    # Never back to the model queue: only the full workers holding the pair consume it.
    assert drain(stack.redis) == [{**first, "queue": "cpu"}]


def test_worker_requeue_after_a_transient_error_sends_the_same_message(stack):
    (first, *_rest) = expected(stack)
    drain(stack.redis)
    state = runtime.state()
    with state.sessions() as session:
        claim = claim_chunk(session, first["chunk_id"], "w")
        outcome = pipeline._fail(state, stack.ext.celery, session, claim, "boom")
    assert outcome == "requeued"
    assert drain(stack.redis) == [first]
