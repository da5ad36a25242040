"""The Celery configuration of every Stapel process, built from its `Settings`: queue and
task names, and every Celery setting (the web's sending app and the workers', beat's and
Flower's app alike). celeryconfig.py and stapel.broker.make_celery only load it."""

from __future__ import annotations

from typing import Any

from kombu import Exchange, Queue

from stapel.kombu_redis import transport_for
from stapel.settings import Settings

POOL_QUEUES = ("cpu", "gpu")
"""The worker pools' shared queues."""
CONTROL_QUEUE = "control"
"""Watchdog and other control tasks."""
CALLBACK_QUEUE = "callbacks"
"""Callback deliveries: their own queue and worker process, so a slow receiver can take
no slot of the watchdog's or of a translation's."""

TRANSLATE_TASK = "stapel.translate_chunk"
"""The stable name of the task that translates one chunk."""
CALLBACK_TASK = "stapel.deliver_callback"
"""The stable name of the task that delivers one job's callback."""
WATCHDOG_TASK = "stapel.watchdog"
"""The stable name of the reconciler's task, which beat sends."""


def celery_config(settings: Settings) -> dict[str, Any]:
    """Return Celery's settings for this process (the web only sends; workers consume)."""
    return {
        "broker_url": settings.redis_url,
        "broker_transport": transport_for(settings.redis_url),
        "broker_connection_retry_on_startup": True,
        "broker_connection_timeout": 4,
        "broker_transport_options": {
            # A task whose worker vanished is redelivered after this long; the watchdog
            # normally requeues much sooner from the missing heartbeat.
            "visibility_timeout": settings.visibility_timeout_s,
            "priority_steps": list(range(10)),
            "sep": ":",
            "queue_order_strategy": "priority",
            "socket_connect_timeout": 4,
            "socket_timeout": 30,
        },
        "task_publish_retry_policy": {
            "max_retries": 2,
            "interval_start": 0,
            "interval_step": 0.5,
            "interval_max": 1,
        },
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_ignore_result": True,
        "result_backend": None,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "task_queues": tuple(
            Queue(name, Exchange(name, type="direct"), routing_key=name)
            for name in (*POOL_QUEUES, CONTROL_QUEUE, CALLBACK_QUEUE)
        ),
        "task_default_queue": CONTROL_QUEUE,
        "task_default_priority": 4,
        "worker_send_task_events": True,
        "task_send_sent_event": False,
        "worker_hijack_root_logger": False,
        "worker_consumer": "workers.consumer:Consumer",  # task events coalesced
        "beat_schedule": {
            "watchdog": {
                "task": WATCHDOG_TASK,
                "schedule": settings.watchdog_interval_s,
                # no `expires`: it compares beat's clock with the worker's; a pass takes
                # a turn in Redis instead (workers.control.take_turn)
                "options": {"queue": CONTROL_QUEUE},
            },
        },
    }
