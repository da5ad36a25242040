"""The API reference: an OpenAPI 3 document at /v1/openapi.json and a page at /docs.

Both need no key. tests/observability/test_openapi.py keeps the document in step with
the app's routes, so a new route without an entry here fails the suite.
"""

from __future__ import annotations

import html
import json
from typing import Any

from flask import Blueprint, Response, jsonify

from app.api import openapi_memories
from app.compat import openapi as compat_openapi
from stapel.states import Status

docs = Blueprint("docs", __name__)

ERROR_CODES = {
    400: [
        "invalid_json",
        "invalid_type",
        "missing_field",
        "unknown_field",
        "invalid_request",
        "no_segments",
        "segment_too_long",
        "invalid_text",
        "invalid_priority",
        "invalid_callback_url",
        "metadata_too_large",
        "unknown_language_pair",
        "unsupported_file_type",
        "invalid_document",
        "invalid_encoding",
        "unsupported_media_type",
        "invalid_idempotency_key",
        "invalid_status",
        "invalid_limit",
        "invalid_cursor",
        "invalid_format",
        "invalid_tmx",
        "memory_pair_mismatch",
        "too_many_memories",
        "language_mismatch",
    ],
    401: ["unauthorized"],
    404: ["not_found"],
    405: ["method_not_allowed"],
    408: ["body_timeout"],
    409: ["job_finished"],
    413: [
        "request_entity_too_large",
        "too_many_segments",
        "too_many_documents",
        "document_too_large",
        "memory_too_large",
    ],
    429: [
        "rate_limited",
        "quota_segments_per_day",
        "quota_jobs_in_flight",
        "memory_quota_exceeded",
        "too_many_uploads",
        "too_many_parses",
    ],
    500: ["internal_error"],
    503: ["database_unavailable", "broker_unavailable", "submission_busy", "busy", "parsers_busy"],
}
"""Status -> the `error.code` values it carries (the error table in docs/api.md)."""

_WHEN = {
    400: "Bad input; nothing is stored",
    401: "Missing, malformed, unknown or revoked key",
    404: "Unknown job or memory, or another tenant's",
    405: "Method not allowed",
    408: "The request body did not arrive within its deadline",
    409: "The job already ended",
    413: "Body, segments or documents over the limits",
    429: "Rate limit or quota of the tenant used up (see Retry-After)",
    500: "Unexpected error",
    503: "Database or queue unreachable (see Retry-After)",
}

JOB: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "status": {"type": "string", "enum": [str(s) for s in Status]},
        "pool": {"type": "string", "enum": ["cpu", "gpu"]},
        "source_lang": {"type": "string"},
        "target_lang": {"type": "string"},
        "priority": {
            "type": "integer",
            "minimum": 0,
            "maximum": 10,
            "description": "9 most urgent; 10 is the compat dialects' interactive lane",
        },
        "documents_total": {"type": "integer"},
        "segments_total": {"type": "integer"},
        "segments_done": {"type": "integer"},
        "segments_failed": {"type": "integer"},
        "split_sentences": {"type": "boolean"},
        "cache": {"type": "boolean"},
        "memories": {"type": "array", "items": {"type": "string"}},
        "segments_from_memory": {"type": "integer"},
        "segments_from_cache": {"type": "integer"},
        "segments_from_mt": {"type": "integer"},
        "segments_review": {"type": "integer"},
        "min_score": {"type": "number", "nullable": True},
        "below_min_score": {"type": "string", "enum": ["empty", "source"], "nullable": True},
        "attempts": {"type": "integer"},
        "error": {"type": "string", "nullable": True},
        "metadata": {"type": "object", "nullable": True},
        "callback_url": {"type": "string", "nullable": True},
        "created_at": {"type": "string", "format": "date-time"},
        "started_at": {"type": "string", "format": "date-time", "nullable": True},
        "finished_at": {"type": "string", "format": "date-time", "nullable": True},
        "links": {
            "type": "object",
            "properties": {k: {"type": "string"} for k in ("self", "result", "cancel")},
        },
    },
}
PROGRESS = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "status": JOB["properties"]["status"],
        "segments_total": {"type": "integer"},
        "segments_done": {"type": "integer"},
        "pace": {
            "type": "object",
            "properties": {
                k: {"type": "number", "nullable": True}
                for k in ("elapsed_s", "rate_per_s", "remaining_s")
            },
        },
        "documents": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "index": {"type": "integer"},
                    "name": {"type": "string", "nullable": True},
                    "format": {"type": "string"},
                    "segments_total": {"type": "integer"},
                    "segments_done": {"type": "integer"},
                    "segments_failed": {"type": "integer"},
                    "links": {"type": "object", "properties": {"file": {"type": "string"}}},
                },
            },
        },
        "scores": {
            "type": "object",
            "description": "Machine translations scoring under each threshold, and those "
            "marked for review",
            "properties": {
                "below": {
                    "type": "object",
                    "properties": {t: {"type": "integer"} for t in ("0.3", "0.5", "0.7")},
                },
                "review": {"type": "integer"},
            },
        },
    },
}
JOB_REQUEST = {
    "type": "object",
    "required": ["source_lang", "target_lang"],
    "properties": {
        "source_lang": {"type": "string", "example": "en"},
        "target_lang": {"type": "string", "example": "de"},
        "segments": {
            "type": "array",
            "items": {"type": "string"},
            "description": "One document; give this or documents",
        },
        "documents": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["segments"],
                "properties": {
                    "id": {"type": "string"},
                    "segments": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
        "priority": {
            "type": "integer",
            "minimum": 0,
            "maximum": 9,
            "default": 5,
            "description": "9 is the most urgent",
        },
        "callback_url": {"type": "string", "format": "uri"},
        "metadata": {"type": "object", "description": "At most STAPEL_MAX_METADATA_BYTES"},
        "split_sentences": {
            "type": "boolean",
            "default": True,
            "description": "Translate each sentence on its own, joined with the source whitespace",
        },
        "memories": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Ids of the tenant's memories of the pair; an exact match of a "
            "segment's source wins over the cache and the model (the first named wins)",
        },
        "cache": {
            "type": "boolean",
            "default": True,
            "description": "Reuse the MT cache (false: every segment from the model)",
        },
        "min_score": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "nullable": True,
            "description": "A machine translation scoring under this is not used: the "
            "segment is marked for review (default: STAPEL_DEFAULT_MIN_SCORE, unset: none)",
        },
        "below_min_score": {
            "type": "string",
            "enum": ["empty", "source"],
            "default": "empty",
            "description": "The target of a segment marked for review: empty, or its source",
        },
    },
}
UPLOAD = {
    "type": "object",
    "required": ["source_lang", "target_lang", "files"],
    "properties": {
        "source_lang": {"type": "string"},
        "target_lang": {"type": "string"},
        "priority": {"type": "integer"},
        "callback_url": {"type": "string"},
        "metadata": {"type": "string", "description": "A JSON object as text"},
        "split_sentences": {"type": "string", "enum": ["true", "false"]},
        "memories": {"type": "string", "description": "Comma-separated memory ids"},
        "cache": {"type": "string", "enum": ["true", "false"]},
        "min_score": {"type": "string", "description": "A number from 0 to 1"},
        "below_min_score": {"type": "string", "enum": ["empty", "source"]},
        "files": {
            "type": "array",
            "items": {"type": "string", "format": "binary"},
            "description": "Documents, one per file: .txt (UTF-8, one segment per line), "
            ".xlf/.xliff (XLIFF 1.2, 2.x), .po/.pot, .srt, .html/.htm, .docx; the format is "
            "recognised from the name and checked against the content (docs/formats.md)",
        },
        "overwrite_targets": {
            "type": "string",
            "enum": ["true", "false"],
            "description": "XLIFF targets and PO msgstrs already there are translated again "
            "(default false: kept)",
        },
        "mark_fuzzy": {
            "type": "string",
            "enum": ["true", "false"],
            "description": "PO entries Stapel translates get the fuzzy flag (default true)",
        },
    },
}
FILE_TYPES = (
    "application/zip",
    "application/xliff+xml",
    "application/x-tmx+xml",
    "text/x-gettext-translation",
    "application/x-subrip",
    "text/html",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
)
"""What `format=file`, `xliff` and `tmx` answer with (text/plain is listed already)."""
RESULT = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "status": {"type": "string"},
        "complete": {"type": "boolean"},
        "segments_total": {"type": "integer"},
        "segments_done": {"type": "integer"},
        "segments_failed": {"type": "integer"},
        "segments_review": {"type": "integer"},
        "documents": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "nullable": True},
                    "segments": {"type": "array", "items": {"type": "string", "nullable": True}},
                    "provenance": {
                        "type": "array",
                        "description": "Per segment: where its target came from (null: not "
                        "translated yet, failed, or blank)",
                        "items": {
                            "type": "object",
                            "nullable": True,
                            "properties": {
                                "origin": {"type": "string", "enum": ["memory", "cache", "mt"]},
                                "model": {
                                    "type": "string",
                                    "nullable": True,
                                    "description": "The model fingerprint (null for memory)",
                                },
                                "pivot": {
                                    "type": "string",
                                    "description": "The language a pair no model serves was "
                                    "translated through (two models, two steps)",
                                },
                                "score": {
                                    "type": "number",
                                    "nullable": True,
                                    "description": "The model's confidence, 0 to 1 (1 for "
                                    "a memory's match)",
                                },
                                "review": {
                                    "type": "boolean",
                                    "description": "Scored under the job's min_score: the "
                                    "target is empty or the source",
                                },
                            },
                        },
                    },
                    "errors": {
                        "type": "array",
                        "description": "Segments that failed alone (their target is null)",
                        "items": {
                            "type": "object",
                            "properties": {
                                "segment": {"type": "integer"},
                                "code": {"type": "string"},
                                "message": {"type": "string"},
                            },
                        },
                    },
                },
            },
        },
    },
}
USAGE = {
    "type": "object",
    "required": [
        "segments_today",
        "segments_limit",
        "segments_reset_at",
        "jobs_in_flight",
        "jobs_in_flight_limit",
    ],
    "properties": {
        "segments_today": {"type": "integer", "minimum": 0},
        "segments_limit": {"type": "integer", "nullable": True},
        "segments_reset_at": {"type": "string", "format": "date-time"},
        "jobs_in_flight": {"type": "integer", "minimum": 0},
        "jobs_in_flight_limit": {"type": "integer", "nullable": True},
    },
}
JOB_ID = {
    "name": "job_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "format": "uuid"},
}


def _json(schema: dict | str, description: str) -> dict:
    ref = {"$ref": f"#/components/schemas/{schema}"} if isinstance(schema, str) else schema
    return {"description": description, "content": {"application/json": {"schema": ref}}}


def _errors(*statuses: int) -> dict:
    return {
        str(s): {
            "description": f"{_WHEN[s]}. Codes: {', '.join(ERROR_CODES[s])}",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
        for s in statuses
    }


def _op(summary: str, responses: dict, *, auth: bool = True, **extra) -> dict:
    op = {"summary": summary, "responses": responses, **extra}
    if auth:
        op["responses"] = {**responses, **_errors(401, 429, 503)}
    else:
        op["security"] = []
    return op


def document() -> dict:
    """Return the OpenAPI 3 document of every route the app serves."""
    return compat_openapi.extend(_v1())


def _v1() -> dict:
    text: dict[str, Any] = {
        "description": "Plain text",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Stapel",
            "version": "1",
            "description": "Batch machine translation. Every /v1 request but this "
            "document carries `Authorization: Bearer <key>`. Errors are "
            '`{"error": {"code", "message"}}`; any request may also '
            "answer 405 (method_not_allowed) or 500 (internal_error).",
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Job": JOB,
                "JobRequest": JOB_REQUEST,
                "Upload": UPLOAD,
                "Result": RESULT,
                "Usage": USAGE,
                "Memory": openapi_memories.MEMORY,
                "Error": {
                    "type": "object",
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["code", "message"],
                            "properties": {
                                "code": {"type": "string"},
                                "message": {"type": "string"},
                            },
                        }
                    },
                },
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            **openapi_memories.paths(_op, _json, _errors),
            "/v1/jobs": {
                "post": _op(
                    "Submit a job (JSON segments/documents, or uploaded files: .txt, XLIFF, "
                    "PO, SRT, HTML, DOCX)",
                    {
                        "202": _json(
                            "Job",
                            "Created; Location names the job (status succeeded when the MT "
                            "cache answered every segment at submit)",
                        ),
                        "200": _json("Job", "Same Idempotency-Key as an earlier job: that job"),
                        **_errors(400, 408, 413),
                    },
                    parameters=[
                        {
                            "name": "Idempotency-Key",
                            "in": "header",
                            "schema": {"type": "string", "maxLength": 200},
                        }
                    ],
                    requestBody={
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/JobRequest"}
                            },
                            "multipart/form-data": {
                                "schema": {"$ref": "#/components/schemas/Upload"}
                            },
                        },
                    },
                ),
                "get": _op(
                    "List the tenant's jobs, newest first",
                    {
                        "200": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "jobs": {
                                        "type": "array",
                                        "items": {"$ref": "#/components/schemas/Job"},
                                    },
                                    "next_cursor": {"type": "string", "nullable": True},
                                },
                            },
                            "A page of jobs",
                        ),
                        **_errors(400),
                    },
                    parameters=[
                        {"name": "status", "in": "query", "schema": JOB["properties"]["status"]},
                        {
                            "name": "limit",
                            "in": "query",
                            "schema": {
                                "type": "integer",
                                "minimum": 1,
                                "maximum": 100,
                                "default": 20,
                            },
                        },
                        {"name": "cursor", "in": "query", "schema": {"type": "string"}},
                    ],
                ),
            },
            "/v1/jobs/{job_id}": {
                "get": _op(
                    "A job's status and progress",
                    {"200": _json("Job", "The job"), **_errors(404)},
                    parameters=[JOB_ID],
                )
            },
            "/v1/jobs/{job_id}/result": {
                "get": _op(
                    "The translated documents; partial (complete: false) while the job runs",
                    {
                        "200": {
                            **_json("Result", "Documents in order (X-Stapel-Complete header)"),
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/Result"}
                                },
                                "text/plain": text["content"]["text/plain"],
                                **{
                                    t: {"schema": {"type": "string", "format": "binary"}}
                                    for t in FILE_TYPES
                                },
                            },
                        },
                        **_errors(400, 404),
                    },
                    parameters=[
                        JOB_ID,
                        {
                            "name": "format",
                            "in": "query",
                            "description": "json (default); txt (one-document jobs); file: "
                            "the documents in their own formats (one file, or a zip of "
                            "several); xliff: the job as XLIFF 2.1; tmx: as TMX 1.4",
                            "schema": {
                                "type": "string",
                                "enum": ["json", "txt", "file", "xliff", "tmx"],
                            },
                        },
                        {
                            "name": "document",
                            "in": "query",
                            "description": "With format=file: only this document (0-based)",
                            "schema": {"type": "integer", "minimum": 0},
                        },
                    ],
                )
            },
            "/v1/jobs/{job_id}/documents": {
                "get": _op(
                    "Progress by document (segments ended of total, failed) and the job's "
                    "pace on the database clock: elapsed_s, rate_per_s, remaining_s",
                    {"200": _json(PROGRESS, "The documents in order"), **_errors(404)},
                    parameters=[JOB_ID],
                )
            },
            "/v1/jobs/{job_id}/cancel": {
                "post": _op(
                    "Cancel a queued or running job",
                    {"200": _json("Job", "The cancelled job"), **_errors(404, 409)},
                    parameters=[JOB_ID],
                )
            },
            "/v1/usage": {
                "get": _op(
                    "The tenant's quota use: segments today, jobs in flight, limits, reset time",
                    {"200": _json("Usage", "Usage now; a null limit means none")},
                )
            },
            "/v1/languages": {
                "get": _op(
                    "The languages and language pairs the models offer",
                    {
                        "200": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "languages": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "properties": {
                                                k: {"type": "string"} for k in ("code", "name")
                                            },
                                        },
                                    },
                                    "pairs": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "properties": {
                                                k: {"type": "string"}
                                                for k in (
                                                    "source",
                                                    "target",
                                                    "pair",
                                                    "model",
                                                    "via",
                                                )
                                            },
                                        },
                                    },
                                },
                            },
                            "Available pairs",
                        )
                    },
                )
            },
            "/": {
                "get": _op(
                    "The page for people who send work (sign in with a key; it calls /v1)",
                    {"200": {"description": "HTML", "content": {"text/html": {}}}},
                    auth=False,
                )
            },
            "/v1/openapi.json": {
                "get": _op(
                    "This document",
                    {"200": _json({"type": "object"}, "OpenAPI 3 document")},
                    auth=False,
                )
            },
            "/docs": {
                "get": _op(
                    "This document as a page",
                    {"200": {"description": "HTML", "content": {"text/html": {}}}},
                    auth=False,
                )
            },
            "/healthz": {
                "get": _op(
                    "200 while the process lives",
                    {"200": _json({"type": "object"}, "Alive")},
                    auth=False,
                )
            },
            "/readyz": {
                "get": _op(
                    "200 when the database and Redis answer",
                    {
                        "200": _json({"type": "object"}, "Ready"),
                        "503": _json({"type": "object"}, "Not ready; checks name what is down"),
                    },
                    auth=False,
                )
            },
            "/metrics": {
                "get": _op(
                    "Prometheus metrics (stapel_*); with STAPEL_METRICS_TOKEN set, only "
                    "`Authorization: Bearer <that token>` (API keys do not work here)",
                    {"200": text, **_errors(401)},
                    auth=False,
                )
            },
        },
    }


@docs.get("/v1/openapi.json")
def openapi_json():
    """Serve the OpenAPI document (no key needed)."""
    return jsonify(document())


@docs.get("/docs")
def docs_page():
    """Serve the API reference as one self-contained HTML page."""
    return Response(render_html(document()), mimetype="text/html")


def render_html(doc: dict) -> str:
    """Render the document as HTML with no external resources."""
    esc = html.escape
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(doc['info']['title'])}"
        " API</title><style>body{font:15px/1.4 system-ui,sans-serif;max-width:60em;"
        "margin:2em auto;padding:0 1em}h2{font-family:monospace;border-top:1px solid #ccc;"
        "padding-top:1em}.m{display:inline-block;min-width:4em;font-weight:bold}"
        "pre{background:#f5f5f5;padding:.5em;overflow:auto;font-size:13px}"
        "td{vertical-align:top;padding:2px 8px}</style></head><body>",
        f"<h1>{esc(doc['info']['title'])} API</h1><p>{esc(doc['info']['description'])}</p>",
        "<p>Machine-readable: <a href='/v1/openapi.json'>/v1/openapi.json</a></p>",
    ]
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            parts.append(
                f"<h2 id='{esc(method + path)}'><span class='m'>{method.upper()}</span>"
                f"{esc(path)}</h2><p>{esc(op['summary'])}"
                f"{'' if op.get('security') == [] else ' (needs a key)'}</p>"
            )
            params = op.get("parameters", [])
            if params:
                parts.append("<table><tr><th>parameter</th><th>in</th><th>schema</th></tr>")
                parts += [
                    f"<tr><td>{esc(p['name'])}</td><td>{esc(p['in'])}</td><td><code>"
                    f"{esc(json.dumps(p.get('schema', {})))}</code></td></tr>"
                    for p in params
                ]
                parts.append("</table>")
            for kind in op.get("requestBody", {}).get("content", {}):
                parts.append(f"<p>Body: <code>{esc(kind)}</code></p>")
            parts.append("<table><tr><th>status</th><th>meaning</th></tr>")
            parts += [
                f"<tr><td>{esc(status)}</td><td>{esc(r['description'])}</td></tr>"
                for status, r in op["responses"].items()
            ]
            parts.append("</table>")
    parts.append("<h2>Schemas</h2>")
    for name, schema in doc["components"]["schemas"].items():
        parts.append(
            f"<h3 id='schema-{esc(name)}'>{esc(name)}</h3>"
            f"<pre>{esc(json.dumps(schema, indent=2))}</pre>"
        )
    parts.append("</body></html>")
    return "".join(parts)
