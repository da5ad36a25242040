"""Operator commands: flask --app app jobs requeue / cancel / purge."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select, update

from stapel.tables import Chunk, Job, Segment, utcnow
from tests.factories import job_body


def submit(client, auth, **fields) -> str:
    response = client.post("/v1/jobs", json=job_body(**fields), headers=auth)
    assert response.status_code == 202
    return response.get_json()["id"]


def test_cancel_needs_no_tenant_and_refuses_a_finished_job(app, client, auth, runner):
    job_id = submit(client, auth)
    result = runner.invoke(args=["jobs", "cancel", job_id])
    assert result.exit_code == 0 and f"cancelled job {job_id}" in result.output
    assert client.get(f"/v1/jobs/{job_id}", headers=auth).get_json()["status"] == "cancelled"
    again = runner.invoke(args=["jobs", "cancel", job_id])
    assert again.exit_code == 1 and "already ended: cancelled" in again.output
    missing = runner.invoke(args=["jobs", "cancel", "nope"])
    assert missing.exit_code == 1 and "no job" in missing.output


def test_requeue_puts_a_failed_job_back_and_sends_its_chunks(
    app, client, auth, runner, redis_client
):
    job_id = submit(client, auth)
    sessions = app.extensions["stapel"].sessions
    with sessions() as s:
        s.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(status="failed", error="boom", finished_at=utcnow())
        )
        s.execute(
            update(Chunk)
            .where(Chunk.job_id == job_id)
            .values(status="failed", attempts=3, error="boom")
        )
        s.commit()
    redis_client.flushdb()
    result = runner.invoke(args=["jobs", "requeue", job_id])
    assert result.exit_code == 0, result.output
    assert "1 of 1 chunk(s) sent" in result.output
    job = client.get(f"/v1/jobs/{job_id}", headers=auth).get_json()
    assert (job["status"], job["error"], job["finished_at"]) == ("queued", None, None)
    with sessions() as s:
        chunk = s.scalars(select(Chunk).where(Chunk.job_id == job_id)).one()
    assert (chunk.status, chunk.attempts) == ("queued", 0) and chunk.sent_at is not None
    assert redis_client.llen("cpu") + sum(redis_client.llen(f"cpu:{p}") for p in range(1, 10)) == 1


def test_requeue_refuses_a_succeeded_job(app, client, auth, runner):
    job_id = submit(client, auth)
    with app.extensions["stapel"].sessions() as s:
        s.execute(update(Job).where(Job.id == job_id).values(status="succeeded"))
        s.commit()
    result = runner.invoke(args=["jobs", "requeue", job_id])
    assert result.exit_code == 1 and "already succeeded" in result.output


def test_purge_deletes_only_old_finished_jobs_with_their_rows(app, client, auth, runner):
    old, recent, running = (submit(client, auth) for _ in range(3))
    now = utcnow()
    with app.extensions["stapel"].sessions() as s:
        s.execute(
            update(Job)
            .where(Job.id == old)
            .values(status="succeeded", finished_at=now - timedelta(days=40))
        )
        s.execute(
            update(Job)
            .where(Job.id == recent)
            .values(status="failed", finished_at=now - timedelta(days=2))
        )
        s.execute(update(Job).where(Job.id == running).values(status="running"))
        s.commit()
    result = runner.invoke(args=["jobs", "purge", "--older-than-days", "30"])
    assert result.exit_code == 0 and "purged 1 job(s)" in result.output
    with app.extensions["stapel"].sessions() as s:
        assert set(s.scalars(select(Job.id))) == {recent, running}
        assert s.scalar(select(func.count()).select_from(Segment).where(Segment.job_id == old)) == 0
        assert s.scalar(select(func.count()).select_from(Chunk).where(Chunk.job_id == old)) == 0
    assert runner.invoke(args=["jobs", "purge"]).exit_code == 2
