"""What the watchdog sees in Redis: messages per queue and priority, unacked ones."""

from __future__ import annotations

import json

from stapel.broker import broker_priority, send_chunk, waiting_task_ids
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
