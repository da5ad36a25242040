"""Insert job and chunk rows straight into the DB, for load the autoscaler reads."""

from __future__ import annotations

from sqlalchemy.orm import Session

from stapel.tables import Chunk, Job, Tenant, new_id


def add_chunks(session: Session, pool: str, chunks: list[tuple[str, str | None]]) -> str:
    """Add one job with a chunk per (status, worker) pair; return the job id."""
    tenant = Tenant(name=f"t-{new_id()[:8]}", callback_secret="s")
    session.add(tenant)
    session.flush()
    job = Job(
        tenant_id=tenant.id,
        pool=pool,
        source_lang="en",
        target_lang="de",
        documents_total=1,
        segments_total=len(chunks),
        chunks_total=len(chunks),
    )
    session.add(job)
    session.flush()
    for idx, (status, worker) in enumerate(chunks):
        session.add(
            Chunk(
                job_id=job.id,
                idx=idx,
                pool=pool,
                first_segment=idx,
                end_segment=idx + 1,
                status=status,
                worker=worker,
            )
        )
    session.commit()
    return job.id
