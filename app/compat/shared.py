"""What both dialects' routes share: the key, the lane, markup, detection per item."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from flask import g
from werkzeug.datastructures import FileStorage

from app.api.jobs import limits
from app.api.parsing import finish_spec, parse_json
from app.api.uploads import parse_document
from app.compat.languages import Catalog, catalog
from app.parse_slots import parse_slot
from app.web import db_session, stapel
from stapel import detect, glossaries, interactive
from stapel.exceptions import StapelError, TooLarge, Unauthorized, ValidationError
from stapel.formats import fragments, inline
from stapel.formats.base import FormatError
from stapel.formats.fragments import Fragment, Markup
from stapel.interactive import Lane
from stapel.jobs import JobSpec
from stapel.keys import tenant_for_key
from stapel.scores import combine, score_of

DETECT_SAMPLE_CHARS = 2000
"""How much of a document's text its language is detected from."""


def authenticate(key: str | None, how: str) -> None:
    """Take the tenant from a plain API key; Unauthorized (the dialects' 403) if none."""
    if not key or not key.strip():
        raise Unauthorized(f"an API key is required: {how}")
    g.tenant_id = tenant_for_key(db_session, key.strip())


def lane() -> Lane:
    """Return the interactive lane of this request's tenant."""
    ext = stapel()
    return Lane(db_session(), ext.redis, ext.celery, ext.served.get(), ext.settings, g.tenant_id)


def models() -> Catalog:
    """Return the model root's pairs now."""
    return catalog(stapel().settings.model_root, stapel().settings.pivot)


def check_count(texts: list[str], status_413: bool, markup: Markup | None = None) -> None:
    """Refuse a request of more texts than STAPEL_INTERACTIVE_MAX_ITEMS (400 or 413).

    Texts with markup may each be longer than a segment (their parts are the segments);
    together they may hold what that many segments can: a request with tags is never
    more work than the largest plain one.
    """
    settings = stapel().settings
    most = settings.interactive_max_items
    if len(texts) > most:
        raise _too_much(f"{len(texts)} texts in one request; the limit is {most}", status_413)
    chars, limit = sum(len(t) for t in texts), most * settings.max_segment_chars
    if markup is not None and chars > limit:
        message = f"the texts hold {chars} characters with their tags; the limit is {limit}"
        raise _too_much(message, status_413)


def _too_much(message: str, status_413: bool) -> StapelError:
    if status_413:
        return TooLarge(message, code="too_many_segments")
    return ValidationError(message, code="too_many_segments")


def spec(source: str, target: str, texts: list[object]) -> JobSpec:
    """Validate texts for a pair by /v1's rules (types, length, NUL, the pair's model)."""
    body = {"source_lang": source, "target_lang": target, "segments": texts}
    return parse_json(body, models().pair_names, limits(), None)


@dataclass(frozen=True)
class Group:
    """The texts of a request that share a source language, with their places."""

    source: str
    places: list[int]


def groups(texts: list[str], source: str | None, target: str) -> tuple[list[Group], list[float]]:
    """Split texts by source language; with source None detect each text's.

    Detection ranks the model root's languages, as /detect does. A text detected in the
    target language forms a group of its own, which is not translated (DeepL answers
    such a text as it was); a language with no model to target is a 400 naming it. A
    blank text (no evidence) goes with the request's most common language, confidence
    0. Returns the groups and each text's confidence (1 when the source was given).
    """
    if source is not None:
        return [Group(source, list(range(len(texts))))], [1.0] * len(texts)
    found = [detected(t, target) if t.strip() else None for t in texts]
    common = Counter(f[0] for f in found if f).most_common(1)
    fallback = common[0][0] if common else _fallback(target)
    chosen = [f or (fallback, 0.0) for f in found]
    by_source: dict[str, list[int]] = {}
    for place, (code, _confidence) in enumerate(chosen):
        by_source.setdefault(code, []).append(place)
    return [Group(s, p) for s, p in by_source.items()], [c for _s, c in chosen]


def detected(text: str, target: str) -> tuple[str, float]:
    """The language of text among the model root's (as /detect ranks them), checked to
    be target itself or a source with a model to target."""
    catalog = models()
    found = detect.best(text, catalog.languages)
    if found is None:
        raise ValidationError(
            "cannot detect the source language: no language of the model root is detectable",
            code="unknown_language_pair",
        )
    if found[0] != target and found[0] not in catalog.sources_to(target):
        raise ValidationError(
            f"the detected source language {found[0]} has no model to {target}: "
            "send source_lang, or a text in a language with a model",
            code="unknown_language_pair",
        )
    return found


def _fallback(target: str) -> str:
    """The source of a request whose texts are all blank: any with a model to target."""
    candidates = detect.detectable(models().sources_to(target)) or models().sources_to(target)
    if not candidates:
        raise ValidationError(
            f"cannot detect the source language: no model translates to {target}",
            code="unknown_language_pair",
        )
    return candidates[0]


def upload_spec(upload: FileStorage, source: str | None, target: str) -> JobSpec:
    """Validate an uploaded document by /v1's upload rules; detect its source if None.

    The language is detected from the document's own text (its segments, tags aside),
    so a Word or XLIFF file is judged by its words, not its markup; a document already
    in the target language is refused, as DeepL refuses it.
    """
    bounds = limits()
    document = parse_document(
        0, upload.filename or "file0", upload.stream, bounds, bounds.max_segments
    )
    if source is None:
        sample = " ".join(inline.strip(s) for s in document.segments)[:DETECT_SAMPLE_CHARS]
        source = detected(sample, target)[0] if sample.strip() else _fallback(target)
        if source == target:
            raise ValidationError(
                "Source and target language are equal: the document is detected as "
                f"{source}, its target language",
                code="same_language",
            )
    fields = {"source_lang": source, "target_lang": target}
    return finish_spec(fields, [document], models().pair_names, bounds, None)


@dataclass(frozen=True)
class Translated:
    """A request's translations in its order, with each text's source and billed count."""

    texts: list[str]
    sources: list[str]
    confidences: list[float]
    billed: list[int]
    scores: list[float | None]
    """Each text's score: its weakest segment's (None when one has none, or no words)."""


def read_texts(texts: list[str], markup: Markup | list[Markup | None] | None) -> list[Fragment]:
    """Read each text's markup (one for all, or each its own) into segments; a malformed
    one is a 400 naming it."""
    each = markup if isinstance(markup, list) else [markup] * len(texts)
    out = []
    for i, (text, kind) in enumerate(zip(texts, each, strict=True)):
        try:
            with parse_slot(len(text) if kind else 0):
                out.append(fragments.parse(text, kind))
        except FormatError as exc:
            name = kind.kind.upper() if kind else "text"
            raise ValidationError(
                f"text {i} is not well-formed {name}{exc.where()}: {exc.message}",
                code="invalid_markup",
            ) from None
    return out


def translate_texts(
    texts: list[str],
    source: str | None,
    target: str,
    api: str,
    markup: Markup | None = None,
    terms: glossaries.Terms | None = None,
) -> Translated:
    """Translate a request's texts in the interactive lane: one job per source language.

    With markup, each text's tags are set aside as inline codes (stapel.formats.fragments)
    and its segments translated; a text without words comes back as it was. Characters
    are billed outside the tags, as DeepL bills them. With a glossary's terms, a text
    holding terms is translated with each wrapped in an ignored element and the
    element replaced by its target term after (stapel.glossaries); billing stays the
    source's.
    """
    parsed = read_texts(texts, markup)
    billed = [f.characters for f in parsed]
    marked = [glossaries.mark(t, terms, markup) if terms else None for t in texts]
    if any(marked):
        kinds = [glossaries.term_markup(markup) if m else markup for m in marked]
        parsed = read_texts([m.text if m else t for m, t in zip(marked, texts, strict=True)], kinds)
    plain = [" ".join(inline.strip(s) for s in f.segments) for f in parsed]
    found, confidences = groups(plain, source, target)
    # A text detected in the target language stays as it was; a source given is checked.
    untouched = {gr.source for gr in found if source is None and gr.source == target}
    sent = [
        gr
        for gr in found
        if gr.source not in untouched and any(parsed[i].segments for i in gr.places)
    ]
    specs = [
        spec(gr.source, target, [s for i in gr.places for s in parsed[i].segments]) for gr in sent
    ]
    translated = interactive.translate(lane(), specs, api, sum(billed)) if specs else []
    out = [f.text for f in parsed]
    scores: list[float | None] = [None] * len(texts)
    for group, targets in zip(sent, translated, strict=True):
        pending = iter(targets)
        for i in group.places:
            pieces = [next(pending) for _ in parsed[i].segments]
            out[i] = parsed[i].rebuild(list[str](pieces))
            scores[i] = combine(score_of(piece) for piece in pieces) if pieces else None
    for i, m in enumerate(marked):
        if m is not None:
            out[i] = glossaries.unmark(out[i], m, markup)
    sources = [""] * len(texts)
    for group in found:
        for place in group.places:
            sources[place] = group.source
    return Translated(out, sources, confidences, billed, scores)
