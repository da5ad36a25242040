"""Job routes: submit, read, list, result, cancel."""

from __future__ import annotations

import base64
import bisect
import json
import logging
from collections.abc import Iterator
from datetime import datetime

from flask import Response, g, jsonify, request
from sqlalchemy import Row

from app.api.blueprints import v1
from app.api.bodies import whole_or_stream
from app.api.parsing import Limits, idempotency_key, parse_json
from app.api.streams import read_json
from app.api.uploads import parse_upload
from app.web import db_session, stapel
from stapel import jobs, quotas, withdrawals
from stapel.broker import send_callback
from stapel.exceptions import ValidationError
from stapel.formats import bilingual, inline, results
from stapel.pivot import served
from stapel.segment_errors import segment_errors
from stapel.states import CallbackStatus, Status
from stapel.submit import submit
from stapel.tables import Job, is_id

log = logging.getLogger(__name__)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def job_json(job: Job | Row) -> dict:
    """Return the public representation of a job (an object, or a row of jobs.read_job)."""
    return {
        "id": job.id,
        "status": job.status,
        "pool": job.pool,
        "source_lang": job.source_lang,
        "target_lang": job.target_lang,
        "priority": job.priority,
        "documents_total": job.documents_total,
        "segments_total": job.segments_total,
        "segments_done": job.segments_done,
        "segments_failed": job.segments_failed or 0,
        "split_sentences": job.split_sentences is not False,
        "cache": job.use_cache is not False,
        "memories": list(job.memories or []),
        "segments_from_memory": job.segments_from_memory or 0,
        "segments_from_cache": job.segments_from_cache or 0,
        "segments_from_mt": job.segments_from_mt or 0,
        "segments_review": job.segments_review or 0,
        "min_score": job.min_score,
        "below_min_score": job.below_min_score,
        "attempts": job.attempts,
        "error": job.error,
        "metadata": job.meta,
        "callback_url": job.callback_url,
        "created_at": _iso(job.created_at),
        "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at),
        "links": job_links(job.id),
    }


def job_links(job_id: str) -> dict:
    """Return a job's links: the paths url_for gives for get_job, get_result and cancel_job.

    Written out, not looked up per link: three url_for calls were a twelfth of a status
    read's CPU (tests/app/test_job_links.py holds them equal to url_for's).
    """
    own = f"{request.script_root}{v1.url_prefix}/jobs/{job_id}"
    return {"self": own, "result": f"{own}/result", "cancel": f"{own}/cancel"}


def limits() -> Limits:
    """Return the limits a job request is checked against, from the settings."""
    s = stapel().settings
    return Limits(
        max_segments=s.max_segments_per_job,
        max_segment_chars=s.max_segment_chars,
        max_documents=s.max_documents_per_job,
        max_metadata_bytes=s.max_metadata_bytes,
        callback_allow_hosts=s.callback_allow_hosts,
    )


@v1.post("/jobs")
def create_job():
    """Accept a job as JSON or as uploaded .txt files; answer 202 once it is stored."""
    ext = stapel()
    pairs = served(ext.settings.model_root, ext.settings.pivot).keys()
    key = idempotency_key(request.headers.get("Idempotency-Key"))
    bounds = limits()
    if request.mimetype == "multipart/form-data":
        boundary = request.mimetype_params.get("boundary", "")
        if not boundary:
            raise ValidationError("the multipart body has no boundary", code="invalid_request")
        spec = parse_upload(request.stream, boundary.encode("latin-1"), pairs, bounds, key)
    elif request.mimetype == "application/json":
        body = read_json(
            request.stream,
            max_segments=bounds.max_segments,
            max_segment_chars=bounds.max_segment_chars,
            max_documents=bounds.max_documents,
        )
        spec = parse_json(body, pairs, bounds, key)
    else:
        raise ValidationError(
            "send application/json or multipart/form-data", code="unsupported_media_type"
        )
    submitted = submit(
        db_session(), ext.redis, ext.celery, ext.served.get(), ext.settings, g.tenant_id, spec
    )
    payload = job_json(submitted.job)
    response = jsonify(payload)
    response.status_code = 202 if submitted.created else 200
    response.headers["Location"] = payload["links"]["self"]
    return response


@v1.get("/jobs/<job_id>")
def get_job(job_id: str):
    """Return a job's status and progress."""
    job = jobs.read_job(stapel().reader, g.tenant_id, job_id)  # one select, no transaction
    return jsonify(job_json(job))


@v1.post("/jobs/<job_id>/cancel")
def cancel_job(job_id: str):
    """Cancel a queued or running job; 409 if it already ended."""
    session = db_session()
    job = jobs.cancel_job(session, g.tenant_id, job_id)
    withdrawals.announce(stapel().redis, job.id)  # workers drop its waiting segments now
    if job.callback_status == CallbackStatus.PENDING:
        send_callback(stapel().celery, job.id)
    return jsonify(job_json(job))


def _encode_cursor(job: Job) -> str:
    raw = f"{job.created_at.isoformat()}|{job.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created, job_id = raw.split("|", 1)
        if not is_id(job_id):
            raise ValueError(job_id)
        return datetime.fromisoformat(created), job_id
    except (ValueError, UnicodeDecodeError):
        raise ValidationError("cursor is not valid", code="invalid_cursor") from None


@v1.get("/jobs")
def list_jobs():
    """List the tenant's jobs, newest first; `status`, `limit` and `cursor` narrow it."""
    status = request.args.get("status")
    if status is not None and status not in tuple(Status):
        raise ValidationError(f"status must be one of {', '.join(Status)}", code="invalid_status")
    max_limit = stapel().settings.page_size_max
    try:
        limit = int(request.args.get("limit", 20))
    except ValueError:
        limit = -1
    if not 1 <= limit <= max_limit:
        raise ValidationError(
            f"limit must be an integer from 1 to {max_limit}", code="invalid_limit"
        )
    cursor = request.args.get("cursor")
    before = _decode_cursor(cursor) if cursor else None
    page = jobs.list_jobs(db_session(), g.tenant_id, status=status, limit=limit, before=before)
    next_cursor = _encode_cursor(page[-1]) if len(page) == limit else None
    return jsonify({"jobs": [job_json(j) for j in page], "next_cursor": next_cursor})


RESULT_FORMATS = ("json", "txt", "file", "xliff", "tmx")
BILINGUAL = {
    "xliff": (bilingual.xliff, "application/xliff+xml", "xlf"),
    "tmx": (bilingual.tmx, "application/x-tmx+xml", "tmx"),
}


@v1.get("/jobs/<job_id>/result")
def get_result(job_id: str):
    """Stream the translated documents; partial (`complete: false`) while the job runs.

    `format=file` gives the documents in their own formats (one file, or a zip of all;
    `document=N` picks one), `format=xliff` and `format=tmx` the job as a bilingual file.
    """
    session = db_session()
    job = jobs.get_job(session, g.tenant_id, job_id)
    fmt = request.args.get("format", "json")
    if fmt not in RESULT_FORMATS:
        raise ValidationError(
            f"format must be one of {', '.join(RESULT_FORMATS)}", code="invalid_format"
        )
    complete = job.status == Status.SUCCEEDED
    headers = {"X-Stapel-Complete": "true" if complete else "false"}
    if fmt == "file":
        return _file(session, job, request.args.get("document"), headers)
    if fmt in BILINGUAL:
        write, mimetype, suffix = BILINGUAL[fmt]
        documents = jobs.iter_result(session, job, sources=True)
        response = Response(
            whole_or_stream(job.segments_total, write(documents, job.source_lang, job.target_lang)),
            mimetype=mimetype,
            headers=headers,
        )
        response.headers.set("Content-Disposition", "attachment", filename=f"{job.id}.{suffix}")
        return response
    if fmt == "txt":
        if job.documents_total != 1:
            raise ValidationError(
                "format=txt needs a single-document job; use JSON for several documents",
                code="invalid_format",
            )
        return Response(
            whole_or_stream(job.segments_total, _txt(session, job)),
            mimetype="text/plain",
            headers=headers,
        )
    return Response(
        whole_or_stream(job.segments_total, _json(session, job, complete, _pivot(job))),
        mimetype="application/json",
        headers=headers,
    )


def _errors_by_document(session, job: Job) -> dict[int, list[dict]]:
    """Per document (by position): its failed segments, as {segment, code, message}."""
    if not job.segments_failed:
        return {}
    failed = segment_errors(session, job.id)
    starts = jobs.document_starts(session, job.id)
    out: dict[int, list[dict]] = {}
    for idx in sorted(failed):
        d = bisect.bisect_right(starts, idx) - 1
        code, message = failed[idx]
        out.setdefault(d, []).append({"segment": idx - starts[d], "code": code, "message": message})
    return out


def _file(session, job: Job, document: str | None, headers: dict) -> Response:
    """One document in its own format, or all of them (a zip when there are several)."""
    if document is None:
        rendered = results.files(session, job)
    else:
        if not (document.isascii() and document.isdigit() and len(document) <= 9):
            raise ValidationError(
                "document must be a document index (0, 1, ...)", code="invalid_format"
            )
        rendered = results.render(session, job, int(document))
    content = rendered.content
    body = content if isinstance(content, bytes) else whole_or_stream(job.segments_total, content)
    response = Response(body, mimetype=rendered.media_type, headers=headers)
    response.headers.set("Content-Disposition", "attachment", filename=rendered.filename)
    return response


def _shown(target: str | None) -> str | None:
    """A target for JSON and text: inline codes of a document shown as <1>, </1>, <1/>."""
    return inline.readable(target) if target and inline.has_codes(target) else target


def _txt(session, job: Job) -> Iterator[str]:
    for _name, segments in jobs.iter_result(session, job):
        for target in segments:
            yield (_shown(target) or "") + "\n"


def _pivot(job: Job) -> str:
    """The language the job's pair is translated through ("" when a model serves it)."""
    settings = stapel().settings
    found = served(settings.model_root, settings.pivot).get(f"{job.source_lang}-{job.target_lang}")
    return found.via if found is not None else ""


def _json(session, job: Job, complete: bool, pivot: str = "") -> Iterator[str]:
    head = {
        "id": job.id,
        "status": job.status,
        "complete": complete,
        "segments_total": job.segments_total,
        "segments_done": job.segments_done,
    }
    head["segments_failed"] = job.segments_failed or 0
    for origin in ("memory", "cache", "mt"):
        head[f"segments_from_{origin}"] = getattr(job, f"segments_from_{origin}") or 0
    head["segments_review"] = job.segments_review or 0
    errors = _errors_by_document(session, job)
    yield json.dumps(head)[:-1] + ', "documents": ['
    starts = jobs.document_starts(session, job.id) + [job.segments_total]
    session.rollback()
    for d, (name, segments) in enumerate(jobs.iter_result(session, job)):
        yield ("," if d else "") + '{"id": ' + json.dumps(name) + ', "segments": ['
        for s, target in enumerate(segments):
            yield ("," if s else "") + json.dumps(_shown(target), ensure_ascii=False)
        # one entry per segment: where its target came from (null: not translated, blank)
        yield '], "provenance": ['
        rows = jobs.iter_provenance(session, job.id, starts[d], starts[d + 1])
        for s, (made_by, fingerprint, score, review) in enumerate(rows):
            entry: dict | None = {"origin": made_by, "model": fingerprint} if made_by else None
            if entry:
                entry |= {"score": score, "review": review}
            if entry and pivot and made_by != "memory":  # two models, through `pivot`
                entry["pivot"] = pivot
            yield ("," if s else "") + json.dumps(entry)
        yield "]" + (', "errors": ' + json.dumps(errors[d]) if d in errors else "") + "}"
    yield "]}"


@v1.get("/usage")
def get_usage():
    """Return the tenant's quota use: segments today and jobs in flight, with limits."""
    ext = stapel()
    s = ext.settings
    return jsonify(
        quotas.usage(
            ext.redis,
            db_session(),
            g.tenant_id,
            segments_limit=s.quota_segments_per_day,
            jobs_limit=s.quota_jobs_in_flight,
        ).as_json()
    )
