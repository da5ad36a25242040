"""A job's documents rebuilt in their own formats: one file, or several as a zip
streamed entry by entry.

A segment not translated yet (a running job) stays as it was in its document: the
source text, or no target in XLIFF and no msgstr in PO. Documents sent as .txt or JSON
come back as text, one segment per line; a .txt upload with its own line endings,
final newline or its absence, and BOM (stapel/formats/txt.py).
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from stapel.exceptions import NotFound
from stapel.formats import MEDIA_TYPES, Mark, Options, render_document, txt
from stapel.tables import Document, DocumentFile, Job, Segment


@dataclass(frozen=True)
class Rendered:
    """One translated document, ready to send."""

    filename: str
    media_type: str
    content: bytes | Iterator[bytes]
    """The file's bytes, or (a zip of several) its bytes as they are made."""


def documents_of(session: Session, job: Job | Row) -> list:
    """The job's document rows in order: idx, name, first_segment, segment_count, format."""
    return list(
        session.execute(
            select(
                Document.idx,
                Document.name,
                Document.first_segment,
                Document.segment_count,
                DocumentFile.format,
            )
            .outerjoin(
                DocumentFile,
                (DocumentFile.job_id == Document.job_id) & (DocumentFile.idx == Document.idx),
            )
            .where(Document.job_id == job.id)
            .order_by(Document.idx)
        ).all()
    )


def _filename(idx: int, name: str | None, fmt: str | None) -> str:
    """The document's file name: its own, or document-N.txt; never a path (zip-slip)."""
    safe = (name or "").replace("/", "_").replace("\\", "_").lstrip(".")
    if safe and (fmt or PurePosixPath(safe).suffix):
        return safe
    return f"{safe or f'document-{idx + 1}'}.txt"


def render(session: Session, job: Job, idx: int) -> Rendered:
    """Rebuild document idx of the job (0-based) in its own format."""
    documents = documents_of(session, job)
    if not 0 <= idx < len(documents):
        raise NotFound(f"job {job.id} has no document {idx} (it has {len(documents)})")
    return _render(session, job, documents[idx])


def _render(session: Session, job: Job, doc) -> Rendered:
    rows = session.execute(
        select(Segment.source, Segment.target, Segment.score, Segment.review)
        .where(
            Segment.job_id == job.id,
            Segment.idx >= doc.first_segment,
            Segment.idx < doc.first_segment + doc.segment_count,
        )
        .order_by(Segment.idx)
    ).all()
    filename = _filename(doc.idx, doc.name, doc.format)
    if doc.format is None:
        text = "".join(
            (target if target is not None else source) + "\n" for source, target, *_ in rows
        )
        session.rollback()
        return Rendered(filename, MEDIA_TYPES["txt"], text.encode())
    stored = session.get(DocumentFile, (job.id, doc.idx))
    if stored is None:  # the format came from this very row; only a purge removes it
        raise NotFound(f"document {doc.idx} of job {job.id} is gone")
    original, options = stored.content, Options.from_json(stored.options)
    session.rollback()
    if doc.format == "txt":  # a .txt upload: its line endings and BOM are kept
        lines = [target if target is not None else source for source, target, *_ in rows]
        return Rendered(filename, MEDIA_TYPES["txt"], txt.merge(original, lines))
    routed = job.min_score is not None
    content = render_document(
        doc.format,
        original,
        [target for _, target, *_ in rows],
        options,
        (job.source_lang, job.target_lang),
        marks=[Mark(score, bool(review) if routed else None) for *_, score, review in rows],
    )
    return Rendered(filename, MEDIA_TYPES[doc.format], content)


def files(session: Session, job: Job) -> Rendered:
    """The job's documents: the one file itself, or a zip of all of them, streamed."""
    documents = documents_of(session, job)
    session.rollback()
    if len(documents) == 1:
        return _render(session, job, documents[0])
    return Rendered(f"{job.id}.zip", "application/zip", _zip(session, job, documents))


class _Pipe:
    """A write-only file whose bytes are taken away as they come (zipfile streams to it)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


def _zip(session: Session, job: Job, documents: list) -> Iterator[bytes]:
    """Yield a zip of the documents, one rendered document in memory at a time.

    The pipe cannot seek, so zipfile writes each entry's sizes after its data (a data
    descriptor), and the archive goes out entry by entry instead of being built whole.
    """
    pipe = _Pipe()
    seen: set[str] = set()
    with zipfile.ZipFile(pipe, "w", zipfile.ZIP_DEFLATED) as archive:
        for doc in documents:
            rendered = _render(session, job, doc)
            name = rendered.filename
            if name in seen:
                name = f"{doc.idx + 1}-{name}"
            seen.add(name)
            assert isinstance(rendered.content, bytes)
            archive.writestr(name, rendered.content)
            yield pipe.take()
    yield pipe.take()
