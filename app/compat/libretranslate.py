"""The LibreTranslate dialect, under /libretranslate/ (Weblate, Mastodon, libretranslatepy).

Parameters come from a JSON body, a form or the query string; `api_key` is a Stapel API
key. Text goes through the interactive lane (stapel.interactive), `format=html` with its
tags kept (stapel.formats.fragments); errors are `{"error": message}` (app.compat.errors).
"""

from __future__ import annotations

from flask import Blueprint, Response, abort, jsonify, request, url_for

from app.compat.errors import Dialect, install
from app.compat.languages import lt_code, resolve
from app.compat.params import all_strings, params
from app.compat.shared import (
    authenticate,
    check_count,
    lane,
    models,
    translate_texts,
    upload_spec,
)
from app.web import db_session, stapel
from stapel import compat_files, detect, interactive
from stapel.exceptions import NotFound, ValidationError
from stapel.formats.fragments import Markup

API = "libretranslate"
PRIORITY_FILE = 9
"""translate_file holds its HTTP request open like text does, but a file can be large: it
runs at the API's most urgent priority (fair share applies), not in the interactive lane."""
KEYLESS = ("languages", "frontend_settings", "download_file", "suggest")
"""Endpoints LibreTranslate serves without a key (a download link is its own key)."""

lt = Blueprint(API, __name__, url_prefix="/libretranslate")
DIALECT = Dialect(
    API, body=lambda message: {"error": message}, status=lambda s, _c: 403 if s == 401 else s
)
install(lt, DIALECT)


@lt.before_request
def _authenticate() -> None:
    if request.endpoint not in {f"{API}.{e}" for e in KEYLESS}:
        authenticate(params().text("api_key"), "send api_key with the request")


def _required(field: str) -> str:
    value = params().text(field)
    if not value:
        raise ValidationError(f"Invalid request: missing {field} parameter", code="missing_field")
    return value


def _pair(source: str, target: str) -> tuple[str | None, str]:
    """Resolve the request's codes to model codes (source None for `auto`)."""
    found = models()
    target_code = resolve(target, found.targets)
    if target_code is None:
        raise ValidationError(f"{target} is not supported", code="unknown_language_pair")
    if source.strip().lower() == "auto":
        return None, target_code
    source_code = resolve(source, found.sources)
    if source_code is None:
        raise ValidationError(f"{source} is not supported", code="unknown_language_pair")
    return source_code, target_code


def _markup() -> Markup | None:
    """The request's `format`: None for text, HTML markup for html."""
    fmt = (params().text("format") or "text").lower()
    if fmt == "html":
        return Markup("html")
    if fmt != "text":
        raise ValidationError(f"format must be text or html, not {fmt!r}", code="invalid_format")
    return None


def _alternatives() -> int:
    raw = params().text("alternatives") or "0"
    if not (raw.isascii() and raw.isdigit()):
        raise ValidationError("alternatives must be a whole number", code="invalid_type")
    return int(raw)


def _texts() -> tuple[list[str], bool]:
    """Return the request's q as a list, and whether it came as one."""
    q = params().value("q")
    if q is None or q == "" or q == []:
        raise ValidationError("Invalid request: missing q parameter", code="missing_field")
    texts = q if isinstance(q, list) else [q]
    if not all_strings(texts):
        raise ValidationError("q must be a string or a list of strings", code="invalid_type")
    return texts, isinstance(q, list)


@lt.post("/translate")
def translate():
    """Translate q (a string or a list) from source (or auto) into target."""
    texts, many = _texts()
    source, target = _pair(_required("source"), _required("target"))
    markup = _markup()
    alternatives = _alternatives()
    check_count(texts, status_413=False, markup=markup)
    done = translate_texts(texts, source, target, API, markup)
    body: dict = {}
    if source is None:
        detected = [_detected(done.sources[i], done.confidences[i]) for i in range(len(texts))]
        body["detectedLanguage"] = detected if many else detected[0]
    body["translatedText"] = done.texts if many else done.texts[0]
    body["score"] = done.scores if many else done.scores[0]  # clients read only their keys
    if alternatives:
        body["alternatives"] = [[] for _ in texts] if many else []
    return jsonify(body)


def _detected(source: str, confidence: float) -> dict:
    return {"confidence": round(confidence * 100, 1), "language": lt_code(source)}


@lt.route("/languages", methods=["GET", "POST"])
def languages():
    """List the model root's languages, each with the targets it has a model to."""
    found = models()
    return jsonify(
        [
            {
                "code": lt_code(code),
                "name": found.name(code),
                "targets": [lt_code(t) for t in found.targets_of(code)],
            }
            for code in found.languages
        ]
    )


@lt.post("/detect")
def detect_language():
    """Rank the model root's languages for q, best first, confidence 0-100."""
    q = params().value("q")
    if not isinstance(q, str) or not q:
        raise ValidationError("Invalid request: missing q parameter", code="missing_field")
    ranked = detect.rank(q, models().languages)
    return jsonify(
        [{"confidence": round(c * 100, 1), "language": lt_code(code)} for code, c in ranked]
    )


@lt.get("/frontend/settings")
def frontend_settings():
    """Answer the settings LibreTranslate's web page and app clients read."""
    found = models()
    target = found.targets[0] if found.targets else "en"
    return jsonify(
        {
            "apiKeys": True,
            "keyRequired": True,
            "charLimit": stapel().settings.max_segment_chars,
            "frontendTimeout": 500,
            "suggestions": False,
            "filesTranslation": True,
            "supportedFilesFormat": [".txt"],
            "language": {
                "source": {"code": "auto", "name": "Auto Detect"},
                "target": {"code": lt_code(target), "name": found.name(target)},
            },
        }
    )


@lt.post("/suggest")
def suggest():
    """Refuse suggestions, as a LibreTranslate server with them disabled does."""
    abort(403, description="Suggestions are disabled on this server.")


@lt.post("/translate_file")
def translate_file():
    """Translate an uploaded document; answer the link it can be downloaded from."""
    upload = request.files.get("file")
    if upload is None:
        raise ValidationError("Invalid request: missing file parameter", code="missing_field")
    source, target = _pair(_required("source"), _required("target"))
    document = upload_spec(upload, source, target)
    document.priority = PRIORITY_FILE
    current = lane()
    job, key = compat_files.submit_document(current, document, API)
    interactive.finish(current, [job.id])
    interactive.succeeded(current.session, current.tenant_id, job.id)
    filename = f"{job.id}.{key}.{document.documents[0].name}"
    return jsonify(
        {"translatedFileUrl": url_for(f"{API}.download_file", filename=filename, _external=True)}
    )


@lt.get("/download_file/<filename>")
def download_file(filename: str):
    """Return a translated document; the link itself is the key."""
    job_id, _, rest = filename.partition(".")
    key, _, original = rest.partition(".")
    if not original:
        raise NotFound("no such file")
    session = db_session()
    job = compat_files.open_document(session, None, job_id, key)
    interactive.succeeded(session, job.tenant_id, job.id)
    rendered = compat_files.result(session, job)
    response = Response(rendered.content, content_type=rendered.media_type)
    response.headers.set("Content-Disposition", "attachment", filename=original)
    return response
