"""The watchdog's count check: no list read while nothing is lost, a full read after a loss."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import select, update

from stapel.liveness import held_messages, live_task_ids
from stapel.presence import publish, read_all
from stapel.tables import Chunk, utcnow
from tests.factories import job_body

QUEUES = ["cpu", "gpu"]


def _sent_a_minute_ago(ext) -> list[str]:
    with ext.sessions() as s:
        past = utcnow() - timedelta(minutes=1)
        s.execute(update(Chunk).values(created_at=past, sent_at=past))
        s.commit()
        return list(s.scalars(select(Chunk.task_id)))


def _keys(client) -> list[str]:
    return [k.decode() for k in client.keys("cpu*")]


def test_nothing_lost_reads_no_list_and_a_loss_is_found(app, client, auth, redis_client):
    redis_client.flushdb()
    ext = app.extensions["stapel"]
    ext.settings = ext.settings.replace(chunk_segments=1)
    assert (
        client.post("/v1/jobs", json=job_body(["A.", "B.", "C."]), headers=auth).status_code == 202
    )
    task_ids = _sent_a_minute_ago(ext)
    assert live_task_ids(redis_client, ext.sessions, QUEUES, {}, 30) is None  # 3 held, 3 sent
    # A worker took one message and waits in line for room: delivered, listed in presence.
    key = _keys(redis_client)[0]
    raw = redis_client.rpop(key)
    redis_client.hset("unacked", "tag-1", json.dumps([json.loads(raw), "", key]))
    message_id = json.loads(raw)["headers"]["id"]
    publish(redis_client, "cpu-1@a", {"pool": "cpu", "waiting": [message_id], "budget": 10})
    assert held_messages(redis_client, QUEUES, read_all(redis_client)) == 3
    assert live_task_ids(redis_client, ext.sessions, QUEUES, read_all(redis_client), 30) is None
    # That worker died (no presence): its delivered message counts no more, so the lists
    # are read, and the other two are found waiting.
    redis_client.delete("stapel:worker:cpu-1@a")
    live = live_task_ids(redis_client, ext.sessions, QUEUES, {}, 30)
    assert live is not None and live == set(task_ids) - {message_id}
