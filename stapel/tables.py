"""Database tables: tenants, their API keys, jobs, documents, segments and chunks; the
machine-translation cache, the tenants' translation memories and DeepL-dialect glossaries
(stapel/mtcache.py, stapel/memories.py, stapel/glossaries.py)."""

from __future__ import annotations

import re
import uuid
from datetime import date, datetime, timedelta, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    literal,
)
from sqlalchemy import false as sa_false
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import TypeDecorator

from stapel.states import Status


def new_id() -> str:
    """Return a random UUID as text: unguessable and unique across processes."""
    return str(uuid.uuid4())


_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def is_id(value: str) -> bool:
    """Whether value has new_id's form: anything else names no row, and is not queried
    (a NUL or a lone surrogate in a query is a database error, not a miss)."""
    return _ID.fullmatch(value) is not None


CLOCK_SKEW = timedelta(0)
"""Test hook only (`workers.faults`, STAPEL_TEST_CLOCK_SKEW_S): shifts this process's clock."""


def utcnow() -> datetime:
    """Return this host's current time, timezone-aware, in UTC.

    For this host's own use (logs, metrics, Redis keys). A timestamp that another host
    compares is written and compared with the database's clock instead: `db_now`.
    """
    return datetime.now(timezone.utc) + CLOCK_SKEW


class UTCDateTime(TypeDecorator):
    """A timestamp kept in UTC and always read back timezone-aware (SQLite drops zones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
            if dialect.name == "sqlite":
                value = value.replace(tzinfo=None)
        return value

    def process_result_value(self, value, dialect):
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value


class DbNow(FunctionElement):
    """The database's current time (plus an offset in seconds) as a SQL expression."""

    type = UTCDateTime()
    inherit_cache = True
    name = "db_now"


@compiles(DbNow)
def _now_postgresql(element: DbNow, compiler: Any, **kw: Any) -> str:
    # now() is the transaction's start: every write of one transaction gets the same time
    clauses = list(element.clauses)
    if not clauses:
        return "now()"
    return f"(now() + make_interval(secs => {compiler.process(clauses[0], **kw)}))"


@compiles(DbNow, "sqlite")
def _now_sqlite(element: DbNow, compiler: Any, **kw: Any) -> str:
    # The text SQLAlchemy stores a datetime as on SQLite ('YYYY-MM-DD HH:MM:SS.ffffff'),
    # so stored and computed times compare as strings (CURRENT_TIMESTAMP has no fraction).
    clauses = list(element.clauses)
    offset = f", {compiler.process(clauses[0], **kw)} || ' seconds'" if clauses else ""
    return f"(strftime('%Y-%m-%d %H:%M:%f', 'now'{offset}) || '000')"


def db_now(offset_s: float | None = None) -> DbNow:
    """Return the database's clock (plus offset_s seconds) as a SQL expression.

    Every timestamp another host compares (heartbeats, sends, creation, callback times,
    leases) is written and compared with this, on SQLite and PostgreSQL alike, so a
    host whose clock is off can neither look dead nor hide a dead worker.
    """
    if offset_s is None:
        return DbNow()
    return DbNow(literal(float(offset_s), Float()))


class Base(DeclarativeBase):
    pass


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    callback_secret: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    min_score: Mapped[float | None] = mapped_column(Float)
    """The tenant's default min_score for /v1 jobs that name none (stapel.scores)."""


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("tenant_id", "idempotency_key", name="uq_jobs_idempotency"),
        Index("ix_jobs_tenant_created", "tenant_id", "created_at"),
        Index("ix_jobs_tenant_status", "tenant_id", "status"),
        Index("ix_jobs_status_pool", "status", "pool"),
        Index("ix_jobs_callback_due", "callback_status", "callback_next_at"),
        Index("ix_jobs_status_finished", "status", "finished_at"),
        Index("ix_jobs_api_finished", "api", "finished_at"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(16), default=Status.QUEUED)
    pool: Mapped[str] = mapped_column(String(16))
    source_lang: Mapped[str] = mapped_column(String(16))
    target_lang: Mapped[str] = mapped_column(String(16))
    priority: Mapped[int] = mapped_column(Integer, default=5)
    """The priority the client asked for (9 most urgent)."""
    dispatch_priority: Mapped[int | None] = mapped_column(Integer)
    """The effective priority every send uses (fair share applied once, at submit)."""
    callback_url: Mapped[str | None] = mapped_column(Text)
    meta: Mapped[dict | None] = mapped_column("metadata", JSON)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    api: Mapped[str | None] = mapped_column(String(16))
    """The compat dialect that made the job (`libretranslate`, `deepl`), None for /v1:
    such jobs are deleted STAPEL_COMPAT_KEEP_S after they end (stapel.interactive)."""
    documents_total: Mapped[int] = mapped_column(Integer)
    segments_total: Mapped[int] = mapped_column(Integer)
    segments_done: Mapped[int] = mapped_column(Integer, default=0)
    """Segments that ended: translated, or failed alone (see segments_failed)."""
    segments_failed: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Segments the model could not translate even alone (each has its error)."""
    split_sentences: Mapped[bool | None] = mapped_column(Boolean)
    """Translate each sentence of a segment apart (None: stored before the option; on)."""
    chunks_total: Mapped[int] = mapped_column(Integer, default=1)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    use_cache: Mapped[bool | None] = mapped_column(Boolean)
    """Look translations up in (and add them to) the MT cache (None: stored before; on)."""
    memories: Mapped[list | None] = mapped_column(JSON)
    """Ids of the tenant's translation memories whose exact matches win (None: none)."""
    segments_from_memory: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    segments_from_cache: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    segments_from_mt: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    segments_review: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Segments whose score fell under min_score: left untranslated, marked for review."""
    min_score: Mapped[float | None] = mapped_column(Float)
    """A machine translation scoring under this is not used (stapel.scores; None: all are)."""
    below_min_score: Mapped[str | None] = mapped_column(String(8))
    """What such a segment's target is: `empty` or `source` (stapel.scores.BelowMinScore)."""
    error: Mapped[str | None] = mapped_column(Text)
    callback_status: Mapped[str | None] = mapped_column(String(16))
    callback_attempts: Mapped[int] = mapped_column(Integer, default=0)
    callback_next_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the next delivery may start (DB clock)."""
    callback_lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """A delivery holds the callback until then (DB clock): it is in flight."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    @property
    def pair(self) -> str:
        return f"{self.source_lang}-{self.target_lang}"


class Document(Base):
    __tablename__ = "documents"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str | None] = mapped_column(String(255))
    first_segment: Mapped[int] = mapped_column(Integer)
    segment_count: Mapped[int] = mapped_column(Integer)


class DocumentFile(Base):
    """An uploaded document in its own format (XLIFF, PO, SRT, HTML, DOCX), kept to rebuild.

    Its segments are the document's rows in `segments`; .txt and JSON documents have none.
    """

    __tablename__ = "document_files"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    format: Mapped[str] = mapped_column(String(16))
    content: Mapped[bytes] = mapped_column(LargeBinary)
    options: Mapped[dict | None] = mapped_column(JSON)


class Segment(Base):
    __tablename__ = "segments"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    source: Mapped[str] = mapped_column(Text)
    target: Mapped[str | None] = mapped_column(Text)
    error_code: Mapped[str | None] = mapped_column(String(32))
    """Set when the segment failed alone (its target stays NULL)."""
    error: Mapped[str | None] = mapped_column(Text)
    origin: Mapped[str | None] = mapped_column(String(8))
    """Where the target came from: `memory`, `cache` or `mt` (stapel.states.Origin)."""
    fingerprint: Mapped[str | None] = mapped_column(String(16))
    """The model fingerprint of a `cache` or `mt` target (stapel.mtcache)."""
    score: Mapped[float | None] = mapped_column(Float)
    """The model's confidence in the target, in [0, 1] (stapel.scores); 1 for a memory's."""
    review: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa_false())
    """Its score fell under the job's min_score: the target is empty or the source."""


class Chunk(Base):
    __tablename__ = "chunks"
    __table_args__ = (
        Index("ix_chunks_job", "job_id", "idx"),
        Index("ix_chunks_status_heartbeat", "status", "heartbeat_at"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    idx: Mapped[int] = mapped_column(Integer)
    pool: Mapped[str] = mapped_column(String(16))
    first_segment: Mapped[int] = mapped_column(Integer)
    end_segment: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default=Status.QUEUED)
    done: Mapped[int] = mapped_column(Integer, default=0)
    from_memory: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    from_cache: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    from_mt: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    review: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    under_30: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Machine translations scoring under 0.3 (stapel.scores.BUCKETS), as under_50, under_70."""
    under_50: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    under_70: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    claim_token: Mapped[str | None] = mapped_column(String(36))
    worker: Mapped[str | None] = mapped_column(String(255))
    task_id: Mapped[str | None] = mapped_column(String(36))
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    error: Mapped[str | None] = mapped_column(Text)


class CacheEntry(Base):
    """One machine translation of one piece, keyed by who may reuse it, model and input.

    `scope` is the tenant's id, or SHARED_SCOPE when the operator shares the cache
    across tenants (STAPEL_CACHE_SHARED); `key` is the hash of the piece's model input
    (stapel.mtcache.piece_key). No source text is kept: only its hash.
    """

    __tablename__ = "mt_cache"
    __table_args__ = (Index("ix_mt_cache_created", "created_at"),)

    scope: Mapped[str] = mapped_column(String(36), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(16), primary_key=True)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    target: Mapped[str] = mapped_column(Text)
    score: Mapped[float | None] = mapped_column(Float)
    """The model's score of target (stapel.scores); entries without one are misses."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When it was stored (DB clock): entries older than STAPEL_CACHE_TTL_S are misses."""


class Memory(Base):
    """A tenant's translation memory, imported from a TMX file for one language pair."""

    __tablename__ = "memories"
    __table_args__ = (Index("ix_memories_tenant_created", "tenant_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    name: Mapped[str | None] = mapped_column(String(255))
    source_lang: Mapped[str] = mapped_column(String(16))
    target_lang: Mapped[str] = mapped_column(String(16))
    entries: Mapped[int] = mapped_column(Integer, default=0)
    chars: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class MemoryEntry(Base):
    """One translation unit of a memory, keyed by its normalized source's hash."""

    __tablename__ = "memory_entries"

    memory_id: Mapped[str] = mapped_column(
        ForeignKey("memories.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    source: Mapped[str] = mapped_column(Text)
    target: Mapped[str] = mapped_column(Text)


class Glossary(Base):
    """A tenant's glossary (the DeepL dialect's): source terms and their fixed targets."""

    __tablename__ = "glossaries"
    __table_args__ = (Index("ix_glossaries_tenant_created", "tenant_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(Text)
    source_lang: Mapped[str] = mapped_column(String(16))
    target_lang: Mapped[str] = mapped_column(String(16))
    entry_count: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class GlossaryEntry(Base):
    """One term of a glossary: a source term (unique in it) and its target term."""

    __tablename__ = "glossary_entries"

    glossary_id: Mapped[str] = mapped_column(
        ForeignKey("glossaries.id", ondelete="CASCADE"), primary_key=True
    )
    source: Mapped[str] = mapped_column(String(1024), primary_key=True)
    target: Mapped[str] = mapped_column(String(1024))


class UsageDay(Base):
    """What a tenant used on one UTC day: the source of truth of its quota and its bill
    (Redis holds fast counters of the same, rebuilt from here: stapel.ledger)."""

    __tablename__ = "usage_days"

    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    slot: Mapped[int] = mapped_column(Integer, primary_key=True)
    """One of stapel.ledger.SLOTS rows of the tenant's day, so concurrent writers seldom
    wait for each other's lock."""
    segments: Mapped[int] = mapped_column(BigInteger, default=0)
    characters: Mapped[int] = mapped_column(BigInteger, default=0)
