"""Documents sent through the compat dialects: a job per file, a key to reach it, its state.

DeepL's document API and LibreTranslate's translate_file take a file; it becomes a job
like any other (parsed by the /v1 upload rules: .txt and every format of
stapel.formats), submitted with quotas, fair share and its characters billed, and comes
back rebuilt in its own format exactly as /v1 renders it. The document's id is the
job's id; its key is an HMAC of the id under the tenant's secret, so nothing more is
stored and only the tenant that uploaded it can read it.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from stapel import billing
from stapel.exceptions import NotFound
from stapel.formats import results
from stapel.formats.results import Rendered
from stapel.interactive import Lane, bill, submit_on
from stapel.jobs import JobSpec
from stapel.states import Status
from stapel.tables import Job, Segment, Tenant, is_id, utcnow

NOMINAL_SEGMENTS_PER_S = 50.0
"""The rate a document's remaining time is guessed at before its first batch is written."""
STATES = {
    Status.QUEUED: "queued",
    Status.RUNNING: "translating",
    Status.SUCCEEDED: "done",
    Status.FAILED: "error",
    Status.CANCELLED: "error",
}
"""A job's status in DeepL's words (its client knows exactly these four)."""


@dataclass(frozen=True)
class DocumentState:
    """Where a document's translation stands, as DeepL reports it."""

    status: str
    seconds_remaining: int | None
    billed_characters: int
    error_message: str | None


def document_key(secret: str, job_id: str) -> str:
    """Return the key that opens a document: 64 hex digits, as DeepL's are."""
    return hmac.new(secret.encode(), f"document:{job_id}".encode(), hashlib.sha256).hexdigest()


def submit_document(lane: Lane, spec: JobSpec, api: str) -> tuple[Job, str]:
    """Submit an uploaded document as a job; return it and its document key."""
    spec.api = api
    with bill(lane, billing.characters(t for doc in spec.documents for t in doc.segments)):
        job = submit_on(lane, spec)
    secret = lane.session.scalar(select(Tenant.callback_secret).where(Tenant.id == lane.tenant_id))
    return job, document_key(secret or "", job.id)


def open_document(session: Session, tenant_id: str | None, job_id: str, key: str) -> Job:
    """Return the document's job if the key opens it; NotFound otherwise.

    With tenant_id None (LibreTranslate's download links carry no API key) the key alone
    opens it, as a capability.
    """
    query = select(Job, Tenant.callback_secret).join(Tenant, Tenant.id == Job.tenant_id)
    query = query.where(Job.id == job_id, Job.api.is_not(None))
    if tenant_id is not None:
        query = query.where(Job.tenant_id == tenant_id)
    found = session.execute(query).first() if is_id(job_id) else None
    given = key.encode("utf-8", "surrogatepass")  # compare_digest refuses non-ASCII str
    if found is None or not hmac.compare_digest(document_key(found[1], job_id).encode(), given):
        raise NotFound(f"no document with id {job_id!r} and this key")
    return found[0]


def state(session: Session, job: Job) -> DocumentState:
    """Return the document's status, time left, billed characters and error."""
    billed = session.scalar(
        select(func.coalesce(func.sum(func.length(Segment.source)), 0)).where(
            Segment.job_id == job.id
        )
    )
    return DocumentState(
        status=STATES[Status(job.status)],
        seconds_remaining=_remaining(job) if job.status == Status.RUNNING else None,
        billed_characters=int(billed or 0),
        error_message=(job.error or f"the job was {job.status}")
        if job.status in (Status.FAILED, Status.CANCELLED)
        else None,
    )


def _remaining(job: Job) -> int:
    left = job.segments_total - job.segments_done
    if not job.segments_done or job.started_at is None:
        return int(left / NOMINAL_SEGMENTS_PER_S) + 1
    elapsed = (utcnow() - job.started_at).total_seconds()
    return int(elapsed / job.segments_done * left) + 1


def result(session: Session, job: Job) -> Rendered:
    """The translated document in its own format, its name and media type (as /v1's)."""
    rendered = results.files(session, job)
    if not isinstance(rendered.content, bytes):  # a compat job holds one document
        rendered = Rendered(rendered.filename, rendered.media_type, b"".join(rendered.content))
    return rendered
