"""Job and chunk states, and what a worker's chunk or a callback delivery came to."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """The state of a job or of one of its chunks (a requeued one goes back to queued)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE = (Status.QUEUED, Status.RUNNING)
"""The states of work that has not ended: it counts against jobs in flight."""

FINAL = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)
"""The states a job or chunk never leaves (except by an operator's requeue)."""


class ChunkOutcome(StrEnum):
    """What finishing or failing a claimed chunk did."""

    JOB_SUCCEEDED = "succeeded"
    """This chunk was the job's last, and the job succeeded with it."""
    CHUNK_SUCCEEDED = "chunk_succeeded"
    """The chunk succeeded; other chunks of its job are still to go."""
    REQUEUED = "requeued"
    """The chunk went back to the queue with an attempt used."""
    JOB_FAILED = "failed"
    """The chunk failed for good and failed its job with it."""
    LOST = "lost"
    """The claim was gone (cancelled or requeued meanwhile): nothing else changed."""


class TaskOutcome(StrEnum):
    """What a chunk task did besides ending its chunk (the task's return value)."""

    SKIPPED = "skipped"
    """The chunk was not claimable (taken, or ended)."""
    DEFERRED = "deferred"
    """The worker had no room: the chunk went back to its queue for any worker."""
    STOPPED = "stopped"
    """The claim was lost while translating: cancelled or requeued."""
    UNAVAILABLE = "model_unavailable"
    """The model does not load on this worker: the chunk went back, no attempt charged."""


class CallbackStatus(StrEnum):
    """Where a job's callback delivery stands."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class Origin(StrEnum):
    """Where a segment's target came from (its provenance in the result)."""

    MEMORY = "memory"
    """An exact match in a translation memory the job named (a human translation)."""
    CACHE = "cache"
    """The MT cache: what the same model made of the same input before."""
    MT = "mt"
    """Translated by the model for this job (at least one of its pieces was)."""
