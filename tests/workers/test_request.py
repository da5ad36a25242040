"""Late acks on a channel that a lost broker closed: logged and dropped, never raised."""

from __future__ import annotations

import logging
import uuid

import pytest
from celery.worker.request import Request as CeleryRequest
from kombu import Connection

from workers.request import Request
from workers.tasks import celery


@pytest.fixture
def orphaned_message(redis_url):
    """A task message whose connection went the way Celery drops a lost broker's.

    Celery restores the connection's unacknowledged messages, then closes it; the
    task that got the message is still running and acks after that.
    """
    conn = Connection(redis_url)
    queue = conn.SimpleQueue(f"test-ack-{uuid.uuid4().hex}")
    queue.put(
        [["chunk-id"], {}, {}], headers={"id": str(uuid.uuid4()), "task": "stapel.translate_chunk"}
    )
    message = queue.get(timeout=10)
    message.channel.qos.restore_unacked_once()
    conn.collect()
    conn.close()
    yield message, conn.connection_errors


def request_of(cls, message, errors):
    """Build a request the way a worker does, acking straight through the message."""
    return cls(
        message,
        app=celery,
        task=celery.tasks["stapel.translate_chunk"],
        connection_errors=errors,
        on_ack=message.ack_log_error,
        on_reject=message.reject_log_error,
    )


def test_celery_request_raises_on_the_closed_channel(orphaned_message):
    """What the worker's event loop met in CI (if this stops failing, kombu fixed it)."""
    with pytest.raises(AttributeError):
        request_of(CeleryRequest, *orphaned_message).acknowledge()


@pytest.mark.parametrize("end", ["acknowledge", "reject"])
def test_request_logs_and_drops_the_ack(orphaned_message, end, caplog):
    request = request_of(Request, *orphaned_message)
    with caplog.at_level(logging.CRITICAL, logger="celery.worker.request"):
        getattr(request, end)()
    assert request.acknowledged
    assert "Couldn't" in caplog.text


def test_every_task_uses_the_request():
    names = ("stapel.translate_chunk", "stapel.watchdog", "stapel.deliver_callback")
    assert all(celery.tasks[name].Request is Request for name in names)
