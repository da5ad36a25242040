"""Glossaries: a tenant's fixed translations of terms, applied by placeholders.

A glossary maps source terms to target terms for one language pair (model codes). Its
entries come as TSV or CSV, as DeepL's v2 API takes them (`parse_entries`). Applied to
a text (`mark`), every longest, case-sensitive, whole-word match of a source term is
wrapped in an element the markup layer keeps whole and untranslated (`TERM_TAG`, added
to the ignored tags), the text is translated with that markup, and `unmark` puts each
match's target term where its element was placed by alignment. A term is kept as a
whole: it is never inflected or re-cased to fit the sentence. A tenant sees, lists and
uses only its own glossaries; another tenant's is "not found".
"""

from __future__ import annotations

import csv
import io
import logging
import re
from dataclasses import dataclass, replace
from html import escape
from xml.sax.saxutils import unescape

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from stapel.exceptions import NotFound, QuotaFull, TooLarge, ValidationError
from stapel.formats import htmlruns
from stapel.formats.fragments import Markup
from stapel.tables import Glossary, GlossaryEntry, db_now, is_id, new_id

log = logging.getLogger(__name__)

FORMATS = ("tsv", "csv")
MAX_TERM_BYTES = 1024
"""DeepL's limit on a term and on a glossary's name, in UTF-8 bytes."""
TERM_TAG = "stapel-term"
"""The element a matched term is wrapped in while its text is translated."""
INSERT_BATCH = 1000
_LINES = re.compile(r"\r\n|\r|\n")
_ELEMENT = re.compile(rf'<{TERM_TAG} i="(\d+)">.*?</{TERM_TAG}>', re.S)
_TOKEN = re.compile(
    r"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>|<(?:[^>\"']|\"[^\"]*\"|'[^']*')*>", re.S
)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufdd0-\ufdd3\ufffe\uffff\ud800-\udfff]")
"""Characters XML cannot hold, and Stapel's tag markers."""
_NAME = re.compile(r"<(/?)\s*([^\s/>]+)")
HTML_UNTRANSLATED = htmlruns.SKIP | htmlruns.ATOMS
"""HTML elements whose text is never translated, so never holds a term."""


def _bad(message: str) -> ValidationError:
    return ValidationError(message, code="invalid_glossary_entries")


def check_term(term: str, where: str) -> None:
    """Refuse an empty term, one with control characters or newlines, or over 1024 bytes."""
    if not term:
        raise _bad(f"{where}: the term is empty")
    for char in term:
        code = ord(char)
        if code <= 31 or 127 <= code <= 159 or char in "\u2028\u2029":
            raise _bad(f"{where}: the term holds the control character U+{code:04X}")
    if len(term.encode()) > MAX_TERM_BYTES:
        raise _bad(f"{where}: the term is over {MAX_TERM_BYTES} UTF-8 bytes")


def _rows(text: str, fmt: str) -> list[list[str]]:
    if fmt == "tsv":
        return [line.split("\t") if line.strip() else [] for line in _LINES.split(text)]
    try:
        return list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error as exc:
        raise _bad(f"the CSV entries are malformed: {exc}") from None


def parse_entries(text: str, fmt: str, langs: tuple[str, str] | None = None) -> dict[str, str]:
    """Return source -> target from TSV or CSV entries, in their order.

    One entry a line, source first; empty lines are skipped and each term's ends are
    trimmed. TSV separates the terms by one tab; CSV by a comma with CSV's quoting, and
    may add the source and target languages as third and fourth fields (they must be
    `langs`, compared by language without region). Raises ValidationError naming the
    entry for a missing separator, an empty or invalid term, or a source term given twice.
    """
    if fmt not in FORMATS:
        raise ValidationError("Value for 'entries_format' not supported.", code="invalid_format")
    entries: dict[str, str] = {}
    for number, row in enumerate(_rows(text, fmt), 1):
        if not row or not any(field.strip() for field in row):
            continue
        where = f"entry {number}"
        if len(row) < 2:
            raise _bad(f"{where} has no {'tab' if fmt == 'tsv' else 'comma'} between its terms")
        if fmt == "tsv" and len(row) > 2:
            raise _bad(f"{where} has more than one tab")
        if fmt == "csv" and len(row) not in (2, 4):
            raise _bad(
                f"{where} has {len(row)} fields; give 2 (source, target) or 4 (and languages)"
            )
        if (
            len(row) == 4
            and langs is not None
            and [_base(f) for f in row[2:]] != [_base(lang) for lang in langs]
        ):
            raise _bad(f"{where} is for {row[2]}-{row[3]}, the glossary for {langs[0]}-{langs[1]}")
        source, target = row[0].strip(), row[1].strip()
        check_term(source, f"{where}, source")
        check_term(target, f"{where}, target")
        if source in entries:
            raise _bad(f"{where} gives the source term {source!r} again")
        entries[source] = target
    if not entries:
        raise _bad("the glossary has no entries")
    return entries


def _base(code: str) -> str:
    return code.strip().lower().replace("-", "_").partition("_")[0]


def to_tsv(entries: dict[str, str]) -> str:
    """Return entries as DeepL answers them: one `source<TAB>target` a line."""
    return "\n".join(f"{s}\t{t}" for s, t in entries.items())


def create(
    session: Session,
    tenant_id: str,
    name: str,
    pair: tuple[str, str],
    entries: dict[str, str],
    *,
    max_entries: int,
    quota: int,
) -> Glossary:
    """Store a new glossary of the tenant for pair (model codes): one transaction.

    Raises ValidationError for a bad name, TooLarge (413) past max_entries entries,
    QuotaFull when the tenant already has quota glossaries.
    """
    if not name or not name.strip():
        raise ValidationError("Parameter 'name' not specified.", code="missing_field")
    if len(name.encode()) > MAX_TERM_BYTES or "\x00" in name:
        raise ValidationError(
            f"the glossary's name must be at most {MAX_TERM_BYTES} UTF-8 bytes", code="invalid_type"
        )
    if len(entries) > max_entries:
        raise TooLarge(
            f"the glossary has {len(entries)} entries; the limit is {max_entries} "
            "(STAPEL_GLOSSARY_MAX_ENTRIES)",
            code="glossary_too_large",
        )
    held = session.scalar(
        select(func.count()).select_from(Glossary).where(Glossary.tenant_id == tenant_id)
    )
    if int(held or 0) >= quota:
        session.rollback()
        raise QuotaFull(
            f"a tenant may hold {quota} glossaries (STAPEL_GLOSSARY_QUOTA); delete one first",
            code="glossary_quota_exceeded",
        )
    glossary = Glossary(
        id=new_id(),
        tenant_id=tenant_id,
        name=name,
        source_lang=pair[0],
        target_lang=pair[1],
        entry_count=len(entries),
        created_at=session.scalar(select(db_now())),
    )
    session.add(glossary)
    session.flush()
    rows = [{"glossary_id": glossary.id, "source": s, "target": t} for s, t in entries.items()]
    for start in range(0, len(rows), INSERT_BATCH):
        session.execute(insert(GlossaryEntry), rows[start : start + INSERT_BATCH])
    session.commit()
    log.info(
        "glossary created tenant=%s glossary=%s pair=%s-%s entries=%d",
        tenant_id,
        glossary.id,
        pair[0],
        pair[1],
        len(entries),
    )
    return glossary


def get(session: Session, tenant_id: str, glossary_id: str) -> Glossary:
    """Return the tenant's glossary, or raise NotFound (also for another tenant's)."""
    glossary = (
        session.scalar(
            select(Glossary).where(Glossary.id == glossary_id, Glossary.tenant_id == tenant_id)
        )
        if is_id(glossary_id)
        else None
    )
    if glossary is None:
        raise NotFound("Glossary not found", code="glossary_not_found")
    return glossary


def list_for(session: Session, tenant_id: str) -> list[Glossary]:
    """Return the tenant's glossaries, oldest first."""
    return list(
        session.scalars(
            select(Glossary)
            .where(Glossary.tenant_id == tenant_id)
            .order_by(Glossary.created_at, Glossary.id)
        )
    )


def entries(session: Session, glossary: Glossary) -> dict[str, str]:
    """Return a glossary's source -> target terms, by source term."""
    rows = session.execute(
        select(GlossaryEntry.source, GlossaryEntry.target)
        .where(GlossaryEntry.glossary_id == glossary.id)
        .order_by(GlossaryEntry.source)
    )
    return {source: target for source, target in rows}


def terms_for(session: Session, tenant_id: str, glossary_id: str, pair: tuple[str, str]) -> Terms:
    """Return the terms of the tenant's glossary for a request of pair (model codes).

    NotFound for a glossary that is not the tenant's, ValidationError for another pair.
    Only a short read: no transaction is left open while the translation runs.
    """
    glossary = get(session, tenant_id, glossary_id)
    if (glossary.source_lang, glossary.target_lang) != pair:
        session.rollback()
        raise ValidationError(
            f"the glossary is for {glossary.source_lang}-{glossary.target_lang}, "
            f"the request for {pair[0]}-{pair[1]}",
            code="glossary_pair_mismatch",
        )
    found = entries(session, glossary)
    session.rollback()
    return terms(found)


def delete_glossary(session: Session, tenant_id: str, glossary_id: str) -> None:
    """Delete the tenant's glossary and its entries (NotFound for another tenant's)."""
    glossary = get(session, tenant_id, glossary_id)
    session.execute(delete(GlossaryEntry).where(GlossaryEntry.glossary_id == glossary.id))
    session.delete(glossary)
    session.commit()
    log.info("glossary deleted tenant=%s glossary=%s", tenant_id, glossary_id)


@dataclass(frozen=True)
class Terms:
    """A glossary's entries ready to match in XML-escaped text, longest terms first."""

    pattern: re.Pattern[str]
    targets: dict[str, str]
    """Target terms by XML-escaped source term."""


def terms(entries: dict[str, str]) -> Terms:
    """Compile entries into a matcher of whole-word, case-sensitive source terms.

    The terms are matched XML-escaped (`&amp;` for `&`), as text stands between tags.
    """
    escaped = {escape(s, quote=False): t for s, t in entries.items()}
    parts = []
    for source in sorted(escaped, key=lambda s: (-len(s), s)):
        left = r"(?<!\w)" if re.match(r"\w", source) else ""
        right = r"(?!\w)" if re.search(r"\w$", source) else ""
        parts.append(left + re.escape(source) + right)
    return Terms(re.compile("|".join(parts)), escaped)


def find(found: Terms, text: str) -> list[tuple[int, int]]:
    """Return the (start, end) spans of the longest term matches in escaped text."""
    return [m.span() for m in found.pattern.finditer(text)]


@dataclass(frozen=True)
class Marked:
    """A text with its matched terms wrapped, and each wrapped term's target, by index."""

    text: str
    targets: list[str]


def term_markup(markup: Markup | None) -> Markup:
    """The markup a marked text is read with: the request's, with TERM_TAG ignored.

    A plain text is read as XML without outline detection or splitting tags.
    """
    if markup is None:
        return Markup("xml", frozenset({TERM_TAG}), outline=False)
    return replace(markup, ignore=markup.ignore | {TERM_TAG})


def mark(text: str, found: Terms, markup: Markup | None) -> Marked | None:
    """Wrap every term match of the text in TERM_TAG; None when no term matches.

    A plain text is XML-escaped first. With markup only the text outside tags is
    searched, and not inside ignored elements (nor HTML's script, style, code and the
    like, which are never translated). Entities other than XML's own (`&nbsp;`,
    `&#39;`) are not decoded for matching: a term holding one does not match.
    """
    if markup is None:
        bad = _NOT_XML.search(text)
        if bad is not None:
            raise ValidationError(
                f"a text holding U+{ord(bad.group(0)):04X} cannot be translated with a glossary "
                "(its terms are carried as XML)",
                code="invalid_request",
            )
        text, skip = escape(text, quote=False), frozenset[str]()
    elif markup.kind == "html":
        skip = frozenset(t.lower() for t in markup.ignore) | HTML_UNTRANSLATED
    else:
        skip = markup.ignore
    html_kind = markup is not None and markup.kind == "html"
    targets: list[str] = []
    out: list[str] = []
    inside: list[str] = []
    at = 0
    for token in _TOKEN.finditer(text):
        out.append(_wrap(text[at : token.start()], found, targets, skip=bool(inside)))
        _track(inside, token.group(0), skip, html_kind)
        out.append(token.group(0))
        at = token.end()
    out.append(_wrap(text[at:], found, targets, skip=bool(inside)))
    return Marked("".join(out), targets) if targets else None


def _track(inside: list[str], token: str, skip: frozenset[str], html_kind: bool) -> None:
    """Keep the stack of open elements whose text is not searched (an ignored one and
    everything in it)."""
    tag = _NAME.match(token)
    if tag is None or token.startswith(("<!", "<?")):
        return
    name = tag.group(2).lower() if html_kind else tag.group(2)
    if tag.group(1):
        if inside and inside[-1] == name:
            inside.pop()
        return
    if token.rstrip().endswith("/>") or (html_kind and name in htmlruns.VOID):
        return
    if inside or name in skip:
        inside.append(name)


def _wrap(piece: str, found: Terms, targets: list[str], skip: bool) -> str:
    if skip:
        return piece
    out, at = [], 0
    for start, end in find(found, piece):
        term = piece[start:end]
        out += [piece[at:start], f'<{TERM_TAG} i="{len(targets)}">{term}</{TERM_TAG}>']
        targets.append(found.targets[term])
        at = end
    out.append(piece[at:])
    return "".join(out)


def unmark(text: str, marked: Marked, markup: Markup | None) -> str:
    """Replace each TERM_TAG element of a translated text by its target term.

    A plain text's markup is undone (its escapes decoded); with markup the target is
    XML-escaped in place of the element.
    """
    out, at = [], 0
    for match in _ELEMENT.finditer(text):
        between = text[at : match.start()]
        target = marked.targets[int(match.group(1))]
        if markup is None:
            out += [unescape(between), target]
        else:
            out += [between, escape(target, quote=False)]
        at = match.end()
    rest = text[at:]
    out.append(unescape(rest) if markup is None else rest)
    return "".join(out)
