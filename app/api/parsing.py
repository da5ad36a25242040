"""Turn a job request (JSON or multipart .txt upload) into a validated JobSpec.

Both are read as streams (app/api/streams.py), so a limit crossed stops the reading;
uploads are taken apart in app/api/uploads.py and finished here like JSON.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Collection
from dataclasses import dataclass

from stapel import formats, scores
from stapel.exceptions import TooLarge, UnknownLanguagePair, ValidationError
from stapel.jobs import DocumentSpec, JobSpec
from stapel.netguard import BlockedDestination, check_literal, target
from stapel.storable import unstorable

JSON_FIELDS = {
    "source_lang",
    "target_lang",
    "segments",
    "documents",
    "priority",
    "callback_url",
    "metadata",
    "split_sentences",
    "memories",
    "cache",
    "min_score",
    "below_min_score",
}
FORM_FIELDS = JSON_FIELDS - {"segments", "documents"} | set(formats.OPTION_FIELDS)
MAX_NAME_CHARS = 255
MAX_URL_CHARS = 2000
MAX_IDEMPOTENCY_KEY_CHARS = 200
PRIORITY_MIN, PRIORITY_MAX, PRIORITY_DEFAULT = 0, 9, 5


@dataclass(frozen=True)
class Limits:
    """The limits a request is checked against (from Settings)."""

    max_segments: int
    max_segment_chars: int
    max_documents: int
    max_metadata_bytes: int
    callback_allow_hosts: tuple[str, ...] = ()


def check_text(value: object, where: str, limits: Limits) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{where} must be a string", code="invalid_type")
    if len(value) > limits.max_segment_chars:
        raise ValidationError(
            f"{where} has {len(value)} characters; the limit is {limits.max_segment_chars}",
            code="segment_too_long",
        )
    check_storable(value, where)
    return value


def check_storable(value: str, where: str) -> None:
    found = unstorable(value)
    if found is not None:
        raise ValidationError(f"{where} contains {found}", code="invalid_text")


def _segments(value: object, where: str, limits: Limits) -> list[str]:
    if not isinstance(value, list):
        raise ValidationError(f"{where} must be a list of strings", code="invalid_type")
    if len(value) > limits.max_segments:
        raise TooLarge(
            f"{where} has {len(value)} segments; the limit per job is {limits.max_segments}",
            code="too_many_segments",
        )
    return [check_text(v, f"{where}[{i}]", limits) for i, v in enumerate(value)]


def _documents(value: object, limits: Limits) -> list[DocumentSpec]:
    if not isinstance(value, list) or not value:
        raise ValidationError("documents must be a non-empty list", code="invalid_type")
    if len(value) > limits.max_documents:
        raise TooLarge(
            f"{len(value)} documents; the limit per job is {limits.max_documents}",
            code="too_many_documents",
        )
    docs = []
    for i, doc in enumerate(value):
        where = f"documents[{i}]"
        if not isinstance(doc, dict):
            raise ValidationError(f"{where} must be an object", code="invalid_type")
        unknown = set(doc) - {"id", "segments"}
        if unknown:
            raise ValidationError(
                f"{where} has unknown fields: {sorted(unknown)}", code="unknown_field"
            )
        name = doc.get("id")
        if name is not None:
            if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
                raise ValidationError(
                    f"{where}.id must be a string of 1 to {MAX_NAME_CHARS} characters",
                    code="invalid_type",
                )
            check_storable(name, f"{where}.id")
        if "segments" not in doc:
            raise ValidationError(f"{where}.segments is required", code="missing_field")
        docs.append(DocumentSpec(name, _segments(doc["segments"], f"{where}.segments", limits)))
    return docs


def _priority(value: object) -> int:
    if value is None:
        return PRIORITY_DEFAULT
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value)
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not (PRIORITY_MIN <= value <= PRIORITY_MAX)
    ):
        raise ValidationError(
            f"priority must be an integer from {PRIORITY_MIN} (least urgent) "
            f"to {PRIORITY_MAX} (most urgent)",
            code="invalid_priority",
        )
    return value


def _callback_url(value: object, allow_hosts: tuple[str, ...] = ()) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_URL_CHARS:
        raise ValidationError("callback_url must be a URL string", code="invalid_callback_url")
    check_storable(value, "callback_url")
    try:
        check_literal(target(value).host, allow_hosts)  # as the sender will send it
    except BlockedDestination as exc:
        raise ValidationError(
            f"callback_url is not allowed: {exc}", code="invalid_callback_url"
        ) from None
    return value


def _metadata(value: object, limits: Limits) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationError("metadata must be a JSON object", code="invalid_type")
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    except (UnicodeEncodeError, ValueError):
        raise ValidationError("metadata is not valid Unicode JSON", code="invalid_text") from None
    if "\\u0000" in json.dumps(value):
        raise ValidationError("metadata contains a NUL character", code="invalid_text")
    if size > limits.max_metadata_bytes:
        raise ValidationError(
            f"metadata is {size} bytes; the limit is {limits.max_metadata_bytes}",
            code="metadata_too_large",
        )
    return value


def _flag(value: object, name: str, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("0", "false", "no", "off"):
        return False
    if isinstance(value, bool):
        return value
    raise ValidationError(f"{name} must be true or false", code="invalid_type")


def _min_score(value: object) -> float | None:
    """The job's min_score: a JSON number, or a form field's text (stapel.scores)."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            value = ...  # not a number: refused below with the option's own message
    return scores.check_min_score(value)


MAX_MEMORIES = 10


def _memories(value: object) -> tuple[str, ...]:
    """The memory ids a job names: a list (JSON) or a comma-separated string (a form)."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValidationError("memories must be a list of memory ids", code="invalid_type")
    if len(value) > MAX_MEMORIES:
        raise ValidationError(
            f"a job may name at most {MAX_MEMORIES} memories", code="too_many_memories"
        )
    for v in value:
        check_storable(v, "memories")
    return tuple(dict.fromkeys(value))


def _lang(value: object, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(
            f"{name} is required and must be a language code",
            code="missing_field" if value is None else "invalid_type",
        )
    return value


def idempotency_key(header: str | None) -> str | None:
    """Validate the Idempotency-Key header."""
    if header is None:
        return None
    if not header or len(header) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise ValidationError(
            f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters",
            code="invalid_idempotency_key",
        )
    return header


def finish_spec(
    fields: dict,
    documents: list[DocumentSpec],
    pairs: Collection[str],
    limits: Limits,
    key: str | None,
) -> JobSpec:
    source = _lang(fields.get("source_lang"), "source_lang")
    target = _lang(fields.get("target_lang"), "target_lang")
    if f"{source}-{target}" not in pairs:
        offered = offered_pairs(pairs)
        raise UnknownLanguagePair(f"no model for {source}-{target}; available pairs: {offered}")
    for doc in documents:
        if doc.original is not None:
            formats.check_target(doc.name or "", doc.format, doc.original, target)
    spec = JobSpec(
        source_lang=source,
        target_lang=target,
        documents=documents,
        priority=_priority(fields.get("priority")),
        callback_url=_callback_url(fields.get("callback_url"), limits.callback_allow_hosts),
        metadata=fields.get("metadata"),
        idempotency_key=key,
        split_sentences=_flag(fields.get("split_sentences"), "split_sentences", True),
        memories=_memories(fields.get("memories")),
        use_cache=_flag(fields.get("cache"), "cache", True),
        min_score=_min_score(fields.get("min_score")),
        below_min_score=scores.check_below(fields.get("below_min_score")).value,
    )
    spec.metadata = _metadata(spec.metadata, limits)
    total = spec.segments_total
    if total == 0:
        raise ValidationError("the job has no segments", code="no_segments")
    if total > limits.max_segments:
        raise TooLarge(
            f"the job has {total} segments; the limit per job is {limits.max_segments}",
            code="too_many_segments",
        )
    return spec


OFFERED_MAX = 40
"""At most this many pairs are named in an unknown-pair error (a multilingual model
serves tens of thousands)."""


def offered_pairs(pairs: Collection[str]) -> str:
    """Name the pairs for an error: all of them, or the first OFFERED_MAX and a count."""
    if not pairs:
        return "none"
    names = list(itertools.islice(pairs, OFFERED_MAX))
    more = len(pairs) - len(names)
    return ", ".join(names) + (f" and {more} more (GET /v1/languages)" if more > 0 else "")


def parse_json(body: object, pairs: Collection[str], limits: Limits, key: str | None) -> JobSpec:
    """Validate a JSON job request."""
    if not isinstance(body, dict):
        raise ValidationError("the body must be a JSON object", code="invalid_json")
    unknown = set(body) - JSON_FIELDS
    if unknown:
        raise ValidationError(f"unknown fields: {sorted(unknown)}", code="unknown_field")
    has_segments, has_documents = "segments" in body, "documents" in body
    if has_segments == has_documents:
        raise ValidationError(
            "give exactly one of 'segments' or 'documents'",
            code="missing_field" if not has_segments else "invalid_request",
        )
    if has_segments:
        documents = [DocumentSpec(None, _segments(body["segments"], "segments", limits))]
    else:
        documents = _documents(body["documents"], limits)
    return finish_spec(body, documents, pairs, limits, key)
