"""Progress by document: GET /v1/jobs/<id>/documents, what the page's bars show."""

from __future__ import annotations

from flask import g, jsonify, url_for

from app.api.blueprints import v1
from app.web import db_session
from stapel import jobs, progress, scores


@v1.get("/jobs/<job_id>/documents")
def job_documents(job_id: str):
    """Return each document's segments ended of total, and the job's rate and time left.

    The job is read once, as a row, before its chunks: a job the answer calls ended has
    every document's count complete. (An ORM object here was reloaded by the pace after
    the counts' read ended its transaction, and an ending in between answered
    `succeeded` with documents at 0%.)
    """
    session = db_session()
    job = jobs.read_job(session.connection(), g.tenant_id, job_id)
    body = progress.as_json(job, progress.documents(session, job), progress.pace(session, job))
    body["scores"] = scores.distribution(session, job.id).as_json()
    session.rollback()  # a read: no transaction stays open
    for doc in body["documents"]:
        doc["links"] = {
            "file": url_for("v1.get_result", job_id=job.id, format="file", document=doc["index"])
        }
    return jsonify(body)
