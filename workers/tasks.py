"""Celery tasks, each with a stable name the web side sends by (stapel.celery_config)."""

from __future__ import annotations

from functools import partial

from stapel.celery_config import CALLBACK_TASK, TRANSLATE_TASK, WATCHDOG_TASK
from workers import control, faults, pipeline
from workers.budget import Held
from workers.celery_app import celery
from workers.runtime import state
from workers.takealong import TAKE_ROOM, Taken

faults.install()  # test hooks only; nothing happens unless STAPEL_TEST_* is set


@celery.task(name=TRANSLATE_TASK, bind=True)
def translate_chunk(
    self, chunk_id: str, segments: int | None = None, interactive: bool = False
) -> str:
    """Translate one chunk of a job (claimed with a compare-and-set, so at most once).

    `segments` is the chunk's size (messages sent before it was added have none);
    `interactive` marks the compat dialects' synchronous lane (stapel.broker). The small
    chunk messages waiting behind this one are taken along and run with it as one unit
    (workers/takealong.py), except by an interactive chunk: its caller waits.
    """
    delivery = self.request.delivery_info or {}
    worker, queue = self.request.hostname or "worker", delivery.get("routing_key", "")
    place = (int(delivery.get("priority") or 0), self.request.id or "")
    own = partial(
        pipeline.run_chunk, self.app, chunk_id, worker, queue, segments, place, interactive
    )
    current = state()
    if interactive or segments is None or not queue:
        return own()
    # room for this chunk and what waits behind it, before the take: it stays within
    held = Held(current.budget, current.budget.take_up_to(segments, TAKE_ROOM))
    if held.segments < segments:  # a line waits, or no room: this chunk takes its place
        return own()
    along = current.takealong
    mine = Taken("", place[1], chunk_id, segments, interactive, place[0])
    try:
        return along.run(
            queue,
            held.segments - segments,
            current.settings.pool,
            place[1],
            lambda taken: pipeline.run_taken(
                self.app, [mine, *taken], held, worker, queue, along.spawn
            ),
        )
    finally:
        held.release()  # whatever happened in the take


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
