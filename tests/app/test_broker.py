"""What the watchdog sees in Redis: messages per queue and priority, unacked ones."""

from __future__ import annotations

import json

from app.broker import UNACKED_KEY, broker_priority, live_task_ids, send_chunk
from app.jobs import ChunkMessage


def test_live_task_ids_reads_the_queues_it_is_given(app, redis_client):
    celery = app.extensions["stapel"].celery
    assert send_chunk(celery, ChunkMessage("c1", "j", "cpu", 5), "t-shared")
    assert send_chunk(celery, ChunkMessage("c2", "j", "cpu", 9), "t-urgent")
    assert send_chunk(celery, ChunkMessage("c3", "j", "cpu", 5, queue="cpu.en-de"), "t-model")
    assert live_task_ids(redis_client, ["cpu"]) == {"t-shared", "t-urgent"}
    assert live_task_ids(redis_client, ["cpu", "cpu.en-de"]) == {
        "t-shared", "t-urgent", "t-model"}
    assert live_task_ids(redis_client, ["gpu"]) == set()


def test_unacked_messages_count_as_live(redis_client):
    message = {"headers": {"id": "t-running"}, "body": ""}
    redis_client.hset(UNACKED_KEY, "tag-1", json.dumps([message, "cpu", "cpu"]))
    assert live_task_ids(redis_client, []) == {"t-running"}


def test_priority_mapping_puts_urgent_first():
    assert broker_priority(9) == 0 and broker_priority(0) == 9
