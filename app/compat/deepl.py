"""The DeepL API v2 dialect, under /deepl/ (the `deepl` client's server_url, Weblate).

`Authorization: DeepL-Auth-Key <key>` carries a Stapel API key. Text goes through the
interactive lane (stapel.interactive), with `tag_handling=xml|html` its tags kept
(stapel.formats.fragments); documents become jobs (stapel.compat_files);
glossaries are the tenant's, applied by placeholders (stapel.glossaries);
errors are `{"message": ...}` with DeepL's statuses, 456 for a used-up quota.
"""

from __future__ import annotations

from flask import Blueprint, Response, g, jsonify, request

from app.compat.errors import Dialect, install
from app.compat.languages import deepl_source, deepl_targets, resolve
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
from stapel import billing, compat_files, glossaries, interactive
from stapel.exceptions import Unauthorized, Unavailable, ValidationError
from stapel.formats import fragments
from stapel.formats.fragments import Markup

API = "deepl"
QUOTA_CODES = ("quota_segments_per_day", "quota_characters_per_day", "glossary_quota_exceeded")
"""Stapel's quota refusals DeepL's clients know as 456 (quota exceeded)."""
FORMALITY_IGNORED = ("default", "prefer_less", "prefer_more")
"""Formality values a model without formality may ignore, as DeepL does."""
SPLIT_SENTENCES = ("0", "1", "nonewlines")
XML_ONLY = ("splitting_tags", "non_splitting_tags")
"""Tag options that only XML tag handling has here (outline_detection is accepted and
ignored with HTML, as DeepL ignores it: its client always sends it)."""
MODEL_TYPES = {
    "quality_optimized": "quality_optimized",
    "prefer_quality_optimized": "quality_optimized",
    "latency_optimized": "latency_optimized",
}
"""DeepL's model_type values and the model_type_used each answers: a pair has one model
here, which serves every type."""
OUTLINE = {"1": True, "true": True, "0": False, "false": False}
TAG_HANDLING_VERSIONS = ("v1", "v2")
"""DeepL's tag algorithms; both name Stapel's one, which parses XML strictly as v2 does."""


def _status(status: int, code: str) -> int:
    if status == 401:
        return 403
    return 456 if code in QUOTA_CODES else status


dl = Blueprint(API, __name__, url_prefix="/deepl")
DIALECT = Dialect(API, body=lambda message: {"message": message}, status=_status)
install(dl, DIALECT)


@dl.before_request
def authenticate_deepl() -> None:
    """Take the tenant from `Authorization: DeepL-Auth-Key <key>`."""
    scheme, _, key = (request.headers.get("Authorization") or "").partition(" ")
    if scheme != "DeepL-Auth-Key":
        raise Unauthorized("Authorization failure: send 'Authorization: DeepL-Auth-Key <key>'")
    authenticate(key, "send 'Authorization: DeepL-Auth-Key <key>'")


def required(field: str) -> str:
    value = params().text(field)
    if not value:
        raise ValidationError(f"Parameter '{field}' not specified.", code="missing_field")
    return value


def _languages(target: str, source: str | None) -> tuple[str | None, str]:
    """Resolve target_lang and source_lang to model codes (source None: detect)."""
    found = models()
    target_code = resolve(target, found.targets)
    if target_code is None:
        raise ValidationError(
            "Value for 'target_lang' not supported.", code="unknown_language_pair"
        )
    if not source:
        return None, target_code
    source_code = resolve(source, found.sources)
    if source_code is None:
        raise ValidationError(
            "Value for 'source_lang' not supported.", code="unknown_language_pair"
        )
    return source_code, target_code


def _check_options() -> None:
    """Refuse the options Stapel cannot honour, naming them; the rest are accepted."""
    p = params()
    formality = (p.text("formality") or "default").lower()
    if formality not in FORMALITY_IGNORED:
        raise ValidationError(
            "'formality' is not supported for given 'target_lang': the models have no "
            "formality (prefer_less and prefer_more are accepted and ignored)",
            code="invalid_request",
        )
    split = p.text("split_sentences")
    if split is not None and split not in SPLIT_SENTENCES:
        raise ValidationError("Value for 'split_sentences' not supported.", code="invalid_request")


def _tag_handling_version() -> str | None:
    """The tag_handling_version asked for, checked; answered back as DeepL does."""
    version = params().text("tag_handling_version")
    if version is None:
        return None
    if version.lower() not in TAG_HANDLING_VERSIONS:
        raise ValidationError(
            "Value for 'tag_handling_version' not supported.", code="invalid_request"
        )
    return version.lower()


def _model_type() -> str | None:
    """The model_type_used to answer for the request's model_type (None: not asked)."""
    value = params().text("model_type")
    if not value:
        return None
    if value.lower() not in MODEL_TYPES:
        raise ValidationError("Value for 'model_type' not supported.", code="invalid_request")
    return MODEL_TYPES[value.lower()]


def _markup() -> Markup | None:
    """The request's tag_handling with its tag options (None: plain text)."""
    p = params()
    kind = (p.text("tag_handling") or "").lower()
    if not kind:
        return None
    if kind not in fragments.KINDS:
        raise ValidationError("Value for 'tag_handling' not supported.", code="invalid_format")
    ignore = _tags("ignore_tags")
    outline = (p.text("outline_detection") or "1").lower()
    if outline not in OUTLINE:
        raise ValidationError(
            "Value for 'outline_detection' not supported.", code="invalid_request"
        )
    if kind == "html":
        given = [n for n in XML_ONLY if p.value(n) not in (None, "", [])]
        if given:
            raise ValidationError(
                f"'{given[0]}' is supported with tag_handling=xml only; HTML is split by "
                "its own block elements",
                code="invalid_request",
            )
        return Markup("html", ignore)
    splitting, non_splitting = _tags("splitting_tags"), _tags("non_splitting_tags")
    return Markup("xml", ignore, splitting, non_splitting, OUTLINE[outline])


def _tags(name: str) -> frozenset[str]:
    """A tag list option: a JSON list or repeated fields, each comma-separated."""
    found: set[str] = set()
    for value in params().values(name):
        if not isinstance(value, str):
            raise ValidationError(f"Parameter '{name}' must hold tag names.", code="invalid_type")
        found.update(tag.strip() for tag in value.split(",") if tag.strip())
    return frozenset(found)


@dl.post("/v2/translate")
def translate():
    """Translate text (one or many) into target_lang; source_lang given or detected."""
    texts = [t for t in params().values("text") if t is not None]
    if not texts:
        raise ValidationError("Parameter 'text' not specified.", code="missing_field")
    if not all_strings(texts):
        raise ValidationError("Parameter 'text' must hold strings.", code="invalid_type")
    target = required("target_lang")
    _check_options()
    version = _tag_handling_version()
    model_type = _model_type()
    markup = _markup()
    check_count(texts, status_413=True, markup=markup)
    source, target_code = _languages(target, params().text("source_lang"))
    terms = _glossary_terms(source, target_code)
    done = translate_texts(texts, source, target_code, API, markup, terms)
    translations = [
        {
            "detected_source_language": deepl_source(done.sources[i]),
            "text": done.texts[i],
            "billed_characters": done.billed[i],
            "score": done.scores[i],  # the deepl client reads only the fields it knows
        }
        for i in range(len(texts))
    ]
    if version and markup:
        for translation in translations:
            translation["tag_handling_version"] = version
    if model_type:
        for translation in translations:
            translation["model_type_used"] = model_type
    return jsonify({"translations": translations})


@dl.route("/v2/languages", methods=["GET", "POST"])
def languages():
    """List source or target languages (`type`), in DeepL's codes."""
    kind = (params().text("type") or "source").lower()
    found = models()
    if kind == "source":
        codes = {deepl_source(c): c for c in reversed(found.sources)}
        return jsonify([{"language": d, "name": found.name(c)} for d, c in reversed(codes.items())])
    if kind != "target":
        raise ValidationError("Value for 'type' not supported.", code="invalid_request")
    return jsonify(
        [
            {"language": code, "name": label, "supports_formality": False}
            for target in found.targets
            for code, label in deepl_targets(target, found.targets, found.name)
        ]
    )


@dl.route("/v2/usage", methods=["GET", "POST"])
def usage():
    """Answer the characters billed today and the daily limit."""
    ext = stapel()
    limit = ext.settings.quota_characters_per_day
    return jsonify(
        {
            "character_count": billing.used(ext.redis, db_session(), g.tenant_id),
            "character_limit": limit or billing.UNLIMITED,
        }
    )


def _glossary_terms(source: str | None, target: str) -> glossaries.Terms | None:
    """The terms of the request's glossary_id (None without one), checked against its pair."""
    glossary_id = params().text("glossary_id")
    if not glossary_id:
        return None
    if source is None:
        raise ValidationError(
            "Use of a glossary requires the 'source_lang' parameter to be specified.",
            code="missing_field",
        )
    return glossaries.terms_for(db_session(), g.tenant_id, glossary_id, (source, target))


@dl.post("/v2/document")
def upload_document():
    """Accept a document as a job; answer its id and key."""
    upload = request.files.get("file")
    if upload is None:
        raise ValidationError("Parameter 'file' not specified.", code="missing_field")
    target = required("target_lang")
    _check_options()
    if params().text("glossary_id"):
        raise ValidationError(
            "glossary_id applies to /v2/translate only here: documents are translated "
            "without a glossary",
            code="invalid_request",
        )
    if params().text("filename"):
        upload.filename = params().text("filename")
    output = (params().text("output_format") or "").lower().lstrip(".")
    if output and not (upload.filename or "").lower().endswith("." + output):
        raise ValidationError(
            "output_format must be the input's format: Stapel converts no documents",
            code="invalid_format",
        )
    source, target_code = _languages(target, params().text("source_lang"))
    try:
        spec = upload_spec(upload, source, target_code)
    except ValidationError as exc:
        if exc.code != "unsupported_file_type":
            raise
        raise ValidationError(
            f"Invalid file data or file extension: {exc.message}", code=exc.code
        ) from None
    job, key = compat_files.submit_document(lane(), spec, API)
    return jsonify({"document_id": job.id, "document_key": key})


def _document(document_id: str):
    key = required("document_key")
    return compat_files.open_document(db_session(), g.tenant_id, document_id, key)


@dl.post("/v2/document/<document_id>")
def document_status(document_id: str):
    """Answer a document's status: queued, translating, done or error."""
    state = compat_files.state(db_session(), _document(document_id))
    body: dict = {"document_id": document_id, "status": state.status}
    if state.seconds_remaining is not None:
        body["seconds_remaining"] = state.seconds_remaining
    if state.status == "done":
        body["billed_characters"] = state.billed_characters
    if state.error_message is not None:
        body["error_message"] = state.error_message
    return jsonify(body)


@dl.post("/v2/document/<document_id>/result")
def document_result(document_id: str):
    """Return a done document's bytes once (the job is deleted as they are sent)."""
    session = db_session()
    job = _document(document_id)
    state = compat_files.state(session, job)
    if state.status in ("queued", "translating"):
        raise Unavailable("Document not ready: its translation is still running", retry_after_s=2)
    if state.status == "error":
        raise ValidationError(f"the document's translation failed: {state.error_message}")
    rendered = compat_files.result(session, job)
    # Deleted before the body goes out: a client that has the whole body can count on a
    # second download answering 404.
    interactive.delete_jobs(session, [job.id])
    response = Response(rendered.content, content_type=rendered.media_type)
    response.headers.set("Content-Disposition", "attachment", filename=rendered.filename)
    return response
