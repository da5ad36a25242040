"""Celery tasks, each with a stable name the web side sends by."""

from __future__ import annotations

from workers import runner
from workers.celery_app import celery


@celery.task(name="stapel.translate_chunk", bind=True)
def translate_chunk(self, chunk_id: str, segments: int | None = None) -> str:
    """Translate one chunk of a job (claimed with a compare-and-set, so at most once).

    `segments` is the chunk's size (messages sent before it was added have none).
    """
    queue = (self.request.delivery_info or {}).get("routing_key", "")
    return runner.run_chunk(chunk_id, self.request.hostname or "worker", queue, segments)


@celery.task(name="stapel.watchdog")
def watchdog() -> str:
    """Requeue or fail stalled chunks and resend lost ones (beat runs this)."""
    return runner.run_watchdog()


@celery.task(name="stapel.deliver_callback")
def deliver_callback(job_id: str) -> str:
    """POST a finished job's signed callback (retries come from the watchdog)."""
    return runner.run_callback(job_id)
