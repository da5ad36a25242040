"""Taking chunk messages along: what is taken, in which order, recorded as kombu records."""

from __future__ import annotations

import json
import threading

import pytest

from stapel.broker import (
    ChunkMessage,
    broker_priority,
    publish,
    send_callback,
    send_chunk,
)
from stapel.celery_config import TRANSLATE_TASK
from workers import takealong
from workers.takealong import TakeAlong, queue_keys


@pytest.fixture
def celery(app):
    return app.extensions["stapel"].celery


def _send(celery, chunk_id: str, priority: int = 5, segments: int = 1, queue: str = "cpu"):
    message = ChunkMessage(chunk_id, f"job-{chunk_id}", "cpu", priority, queue, segments)
    assert send_chunk(celery, message, f"task-{chunk_id}")


def _left(redis_client, queue: str = "cpu") -> list[str]:
    """The chunk ids still in the queue's lists, in the order BRPOP would serve them."""
    ids = []
    for key in queue_keys(queue):
        for raw in reversed(redis_client.lrange(key, 0, -1)):
            ids.append(json.loads(raw)["headers"]["id"].removeprefix("task-"))
    return ids


def test_a_take_moves_chunk_messages_into_unacked_most_urgent_first(celery, redis_client):
    for chunk_id, priority in (("a", 5), ("b", 9), ("c", 5), ("d", 10)):
        _send(celery, chunk_id, priority)

    taken = TakeAlong(redis_client).take("cpu", room=100)

    # priority 9 and the interactive 10 share Redis's first list, then arrival order
    assert [t.chunk_id for t in taken] == ["b", "d", "a", "c"]
    assert [t.priority for t in taken] == [broker_priority(9)] * 2 + [broker_priority(5)] * 2
    assert [t.interactive for t in taken] == [False, True, False, False]
    assert {t.task_id for t in taken} == {"task-a", "task-b", "task-c", "task-d"}
    assert _left(redis_client) == []
    tags = {t.delivery_tag for t in taken}
    assert {k.decode() for k in redis_client.hkeys("unacked")} == tags
    assert {m.decode() for m in redis_client.zrange("unacked_index", 0, -1)} == tags


def test_a_take_stops_at_the_first_message_it_may_not_take(celery, redis_client):
    _send(celery, "small-1")
    _send(celery, "big", segments=takealong.TAKE_SEGMENTS + 1)
    _send(celery, "small-2")
    send_callback(celery, "job-x")  # another task's message: on its own queue, untouched

    taken = TakeAlong(redis_client).take("cpu", room=100)

    assert [t.chunk_id for t in taken] == ["small-1"]
    assert _left(redis_client) == ["big", "small-2"]  # put back where it was

    publish(celery, "some.other.task", "task-other", ["x"], {}, "gpu", broker_priority(5))
    _send(celery, "gpu-small", queue="gpu")
    assert TakeAlong(redis_client).take("gpu", room=100) == []
    assert _left(redis_client, "gpu") == ["other", "gpu-small"]


def test_a_take_stays_within_the_room_and_its_count(celery, redis_client, monkeypatch):
    for n in range(6):
        _send(celery, f"c{n}", segments=3)
    along = TakeAlong(redis_client)

    assert [t.chunk_id for t in along.take("cpu", room=7)] == ["c0", "c1"]  # 3 + 3 <= 7

    assert along.backlog  # the room ended it, not the queue
    monkeypatch.setattr(takealong, "TAKE_AT_MOST", 1)
    assert [t.chunk_id for t in along.take("cpu", room=100)] == ["c2"]
    assert along.backlog
    monkeypatch.setattr(takealong, "TAKE_AT_MOST", 100)
    assert [t.chunk_id for t in along.take("cpu", room=100)] == ["c3", "c4", "c5"]
    assert not along.backlog  # the queue is empty: the consumer may pause again


def test_a_chunk_goes_on_alone_on_a_thread_while_one_is_free(redis_client, monkeypatch):
    along = TakeAlong(redis_client)
    here = threading.get_ident()
    assert along.spawn(threading.get_ident).result(timeout=10) != here

    failed = along.spawn(lambda: 1 / 0)
    assert isinstance(failed.exception(timeout=10), ZeroDivisionError)

    monkeypatch.setattr(takealong, "TAKE_THREADS", 0)  # none free: the caller keeps it
    assert along.spawn(threading.get_ident) is None


def test_kombu_restores_a_taken_message_to_its_queue(celery, redis_client):
    """The `unacked` record is kombu's own: its restore puts the message back as sent."""
    _send(celery, "a")
    sent = json.loads(redis_client.lrange("cpu:4", 0, -1)[0])
    (taken,) = TakeAlong(redis_client).take("cpu", room=100)

    with celery.connection_for_write() as conn:
        conn.default_channel.qos.restore_by_tag(taken.delivery_tag)

    (back,) = [json.loads(raw) for raw in redis_client.lrange("cpu:4", 0, -1)]
    assert back["headers"].pop("redelivered") is True
    assert back["properties"]["delivery_info"].pop("redelivered") is True
    assert back == sent
    assert redis_client.hlen("unacked") == 0


def test_acked_messages_leave_unacked_and_its_index(celery, redis_client):
    for chunk_id in ("a", "b", "c"):
        _send(celery, chunk_id)
    along = TakeAlong(redis_client)
    taken = along.take("cpu", room=100)

    along.ack(taken[:2])

    assert [k.decode() for k in redis_client.hkeys("unacked")] == [taken[2].delivery_tag]
    assert redis_client.zcard("unacked_index") == 1


def test_the_message_names_the_translate_task_and_carries_its_size(celery, redis_client):
    _send(celery, "a", segments=7)
    raw = json.loads(redis_client.lrange("cpu:4", 0, -1)[0])
    assert raw["headers"]["task"] == TRANSLATE_TASK
    (taken,) = TakeAlong(redis_client).take("cpu", room=100)
    assert (taken.chunk_id, taken.segments) == ("a", 7)


def test_the_consumer_pauses_after_a_small_chunk_but_not_an_interactive_or_large_one(
    celery, redis_client
):
    for chunk_id, priority, segments in (
        ("small", 5, 1),
        ("urgent", 9, 3),
        ("interactive", 10, 1),
        ("large", 5, takealong.TAKE_SEGMENTS + 1),
    ):
        _send(celery, chunk_id, priority, segments)
    send_callback(celery, "job-x")  # another task's message, on its own queue
    headers = {
        json.loads(raw)["headers"]["id"].removeprefix("task-"): json.loads(raw)["headers"]
        for key in [*queue_keys("cpu"), *queue_keys("callbacks")]
        for raw in redis_client.lrange(key, 0, -1)
    }

    paced = {name for name, h in headers.items() if takealong.takes_along(h)}

    assert paced == {"small", "urgent"}, headers


@pytest.mark.parametrize(
    ("pause_ms", "batch_wait_ms", "pause_s"),
    [(None, 50, 0.04), (None, 5, 0.004), (10, 50, 0.01), (0, 50, 0.0)],
)
def test_the_pause_is_a_share_of_the_batch_wait_unless_set(pause_ms, batch_wait_ms, pause_s):
    """Unset, the pause ends before the delivered job's batch wait does; set, it is as
    set (0 turns it off)."""
    assert takealong.consume_pause_s(pause_ms, batch_wait_ms) == pytest.approx(pause_s)


def test_an_empty_takes_backoff_ends_within_the_pause(redis_client):
    """A pause shorter than twice the backoff shortens it: the task delivered after the
    pause must look for what the pause held back."""
    along, before = TakeAlong(redis_client), takealong.QoS.pace
    try:
        takealong.pace_consumer(0.004, along)
        assert along.backoff_s == pytest.approx(0.002)
        takealong.pace_consumer(0.04, along)
        assert along.backoff_s == takealong.EMPTY_BACKOFF_S
        takealong.pace_consumer(0.004, along)
        takealong.pace_consumer(0, along)  # no pause: the backoff as it stands alone
        assert along.backoff_s == takealong.EMPTY_BACKOFF_S
    finally:
        takealong.QoS.pace = before
