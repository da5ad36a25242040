"""Celery tasks, each with a stable name the web side sends by (stapel.broker)."""

from __future__ import annotations

from stapel.broker import CALLBACK_TASK, TRANSLATE_TASK, WATCHDOG_TASK
from workers import control, pipeline
from workers.celery_app import celery


@celery.task(name=TRANSLATE_TASK, bind=True)
def translate_chunk(
    self, chunk_id: str, segments: int | None = None, interactive: bool = False
) -> str:
    """Translate one chunk of a job (claimed with a compare-and-set, so at most once).

    `segments` is the chunk's size (messages sent before it was added have none);
    `interactive` marks the compat dialects' synchronous lane (stapel.broker).
    """
    queue = (self.request.delivery_info or {}).get("routing_key", "")
    return pipeline.run_chunk(
        self.app, chunk_id, self.request.hostname or "worker", queue, segments, interactive
    )


@celery.task(name=WATCHDOG_TASK, bind=True)
def watchdog(self) -> str:
    """Requeue or fail stalled chunks and resend lost ones (beat runs this)."""
    return control.run_watchdog(self.app)


@celery.task(name=CALLBACK_TASK)
def deliver_callback(job_id: str) -> str:
    """POST a finished job's signed callback (retries come from the watchdog)."""
    return control.run_callback(job_id)
