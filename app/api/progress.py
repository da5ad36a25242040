"""Progress by document: GET /v1/jobs/<id>/documents, what the page's bars show."""

from __future__ import annotations

from flask import g, jsonify, url_for

from app.api.blueprints import v1
from app.web import db_session
from stapel import jobs, progress


@v1.get("/jobs/<job_id>/documents")
def job_documents(job_id: str):
    """Return each document's segments ended of total, and the job's rate and time left."""
    session = db_session()
    job = jobs.get_job(session, g.tenant_id, job_id)
    body = progress.as_json(job, progress.documents(session, job), progress.pace(session, job))
    for doc in body["documents"]:
        doc["links"] = {
            "file": url_for("v1.get_result", job_id=job.id, format="file", document=doc["index"])
        }
    return jsonify(body)
