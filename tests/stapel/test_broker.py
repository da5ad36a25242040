"""What the watchdog sees in Redis: messages per queue and priority, unacked ones."""

from __future__ import annotations

import json
import threading

import pytest
from celery.utils.saferepr import saferepr

from stapel.broker import (
    INTERACTIVE_HEADER,
    SEGMENTS_HEADER,
    _publisher,
    _short_repr,
    broker_priority,
    make_celery,
    send_chunk,
    waiting_task_ids,
)
from stapel.celery_config import TRANSLATE_TASK
from stapel.dispatch import ChunkMessage


def test_waiting_task_ids_reads_the_queues_it_is_given(app, redis_client):
    celery = app.extensions["stapel"].celery
    assert send_chunk(celery, ChunkMessage("c1", "j", "cpu", 5, "cpu", 1), "t-shared")
    assert send_chunk(celery, ChunkMessage("c2", "j", "cpu", 9, "cpu", 1), "t-urgent")
    assert send_chunk(celery, ChunkMessage("c3", "j", "cpu", 5, "cpu.en-de", 1), "t-model")
    assert waiting_task_ids(redis_client, ["cpu"]) == {"t-shared", "t-urgent"}
    assert waiting_task_ids(redis_client, ["cpu", "cpu.en-de"]) == {
        "t-shared",
        "t-urgent",
        "t-model",
    }
    assert waiting_task_ids(redis_client, ["gpu"]) == set()


def test_delivered_messages_do_not_count(redis_client):
    """A delivered message whose chunk is still queued lost its worker before the claim."""
    message = {"headers": {"id": "t-delivered"}, "body": ""}
    redis_client.hset("unacked", "tag-1", json.dumps([message, "cpu", "cpu"]))
    assert waiting_task_ids(redis_client, ["cpu"]) == set()


def test_priority_mapping_puts_urgent_first():
    assert broker_priority(9) == 0 and broker_priority(0) == 9


def _without_tag(raw: bytes) -> dict:
    message = json.loads(raw)
    assert message["properties"].pop("delivery_tag")
    return message


def test_a_chunk_message_is_exactly_what_celery_would_send(app, redis_client):
    """send_chunk pushes the message itself; a worker must not be able to tell."""
    celery = app.extensions["stapel"].celery
    for priority, queue, interactive in (
        (5, "cpu", False),
        (9, "gpu.en-de", False),
        (10, "cpu", True),
    ):
        chunk = ChunkMessage("c1", "j", "cpu", priority, queue, 3)
        assert send_chunk(celery, chunk, "t-ours")
        kwargs = {"segments": 3} | ({"interactive": True} if interactive else {})
        celery.send_task(
            TRANSLATE_TASK,
            args=["c1"],
            kwargs=kwargs,
            queue=queue,
            priority=broker_priority(priority),
            task_id="t-ours",
            headers={SEGMENTS_HEADER: 3} | ({INTERACTIVE_HEADER: 1} if interactive else {}),
        )
        key = queue if priority == 9 or priority == 10 else f"{queue}:{broker_priority(priority)}"
        theirs, ours = redis_client.lpop(key), redis_client.lpop(key)
        assert redis_client.llen(key) == 0, key
        assert _without_tag(ours) == _without_tag(theirs)


@pytest.mark.parametrize(
    ("value", "ours"),
    [
        (["0f8c7a2e-1b2c-4d5e-9f00-123456789abc"], True),
        ({"segments": 3, "interactive": True}, True),
        ({}, True),
        (["it's"], False),
        (["a\\b"], False),
        (["line\nbreak"], False),
        (["ü"], False),
        (["x" * 500], False),
        ({"segments": [["a", "b"]]}, False),
    ],
)
def test_a_task_repr_we_write_is_the_one_celery_would(app, value, ours):
    """A chunk's id and flags are written by repr, equal to saferepr; the rest by Celery."""
    amqp = app.extensions["stapel"].celery.amqp
    limit = amqp.argsrepr_maxsize if isinstance(value, list) else amqp.kwargsrepr_maxsize
    written = _short_repr(value)
    assert (written is not None) == ours
    if ours:
        assert written == saferepr(value, limit, maxlevels=amqp.app.conf.task_repr_maxlevels)


def test_threads_sending_at_once_share_one_publisher(app):
    """A second client made by a racing thread would replace the first, and the first,
    collected, closes its connections under the thread still sending on it."""
    celery = make_celery(app.extensions["stapel"].settings)
    barrier, clients = threading.Barrier(16), []

    def first_send() -> None:
        barrier.wait()
        clients.append(_publisher(celery))

    threads = [threading.Thread(target=first_send) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(c) for c in clients}) == 1
