"""Celery tasks, each with a stable name the web side sends by (stapel.celery_config)."""

from __future__ import annotations

import logging

from stapel import metrics
from stapel.celery_config import CALLBACK_TASK, TRANSLATE_TASK, WATCHDOG_TASK
from workers import control, faults, pipeline
from workers.celery_app import celery
from workers.runtime import state
from workers.takealong import Taken

log = logging.getLogger(__name__)

faults.install()  # test hooks only; nothing happens unless STAPEL_TEST_* is set


@celery.task(name=TRANSLATE_TASK, bind=True)
def translate_chunk(
    self, chunk_id: str, segments: int | None = None, interactive: bool = False
) -> str:
    """Translate one chunk of a job (claimed with a compare-and-set, so at most once).

    `segments` is the chunk's size (messages sent before it was added have none);
    `interactive` marks the compat dialects' synchronous lane (stapel.broker). The small
    chunk messages waiting behind this one are taken along and run beside it
    (workers/takealong.py), except by an interactive chunk: its caller waits.
    """
    delivery = self.request.delivery_info or {}
    worker, queue = self.request.hostname or "worker", delivery.get("routing_key", "")
    current = state()
    along = current.takealong
    taken: list[Taken] = []
    if not interactive and queue and not current.budget.closed:
        taken = along.take(queue, current.budget.limit - current.budget.held - (segments or 0))
        if taken:
            metrics.TAKEN_ALONG.labels(current.settings.pool).inc(len(taken))
            log.info("took along count=%d queue=%s task=%s", len(taken), queue, self.request.id)
    running = along.run(
        taken,
        lambda m: pipeline.run_chunk(
            self.app,
            m.chunk_id,
            worker,
            queue,
            m.segments,
            place=(m.priority, m.task_id),
            interactive=m.interactive,
        ),
    )
    try:
        return pipeline.run_chunk(
            self.app,
            chunk_id,
            worker,
            queue,
            segments,
            place=(int(delivery.get("priority") or 0), self.request.id or ""),
            interactive=interactive,
        )
    finally:
        for message, future in zip(taken, running, strict=True):
            if (error := future.exception()) is not None:  # waits; acked as a failed task is
                # in the words Celery logs a delivered task's failure with
                log.error(
                    "Task %s[%s] raised unexpected: %r", TRANSLATE_TASK, message.task_id, error
                )
        along.ack(taken)


@celery.task(name=WATCHDOG_TASK, bind=True)
def watchdog(self) -> str:
    """Requeue or fail stalled chunks and resend lost ones (beat runs this)."""
    return control.run_watchdog(self.app)


@celery.task(name=CALLBACK_TASK)
def deliver_callback(job_id: str) -> str:
    """POST a finished job's signed callback (retries come from the watchdog).

    Runs on the `callbacks` queue, in its own worker process (Procfile `worker_callbacks`).
    """
    return control.run_callback(job_id)
