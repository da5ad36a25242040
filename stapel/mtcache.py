"""The machine-translation cache: what a model made of a piece, reused instead of redone.

An entry is keyed by its scope (the tenant, or SHARED_SCOPE when the operator shares the
cache: STAPEL_CACHE_SHARED), the model's fingerprint and the piece's key. The key is the
hash of the exact token sequence the model is fed (the piece's SentencePiece pieces,
end-of-source token included), so the documented normalization is SentencePiece's own:
two sources the model cannot tell apart share an entry, and a hit is by construction
what the model would produce now. The fingerprint covers the model's files and every
option that changes output (decoding lengths, beam size, compute type, device), so an
updated model or a changed option never serves an old translation.

A chunk's pieces are looked up in one query (the primary key's index); its new
translations are stored with one bulk upsert in the transaction that writes them.
Beside each piece, a worker stores the whole segment under `segment_key` (its exact
text), which the web looks up to answer a fully cached job at submit.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

from sqlalchemy import Float, bindparam, delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from stapel.scores import Scored, score_of
from stapel.tables import CacheEntry, DbNow, db_now

log = logging.getLogger(__name__)

SHARED_SCOPE = "*"
"""The scope of every entry when the cache is shared across tenants."""

LOOKUP_BATCH = 900
"""Keys per lookup statement (SQLite's default limit is 999 bound parameters)."""


def piece_key(tokens: Sequence[str]) -> str:
    """Return the cache key of a piece: the hash of the tokens the model is fed."""
    return hashlib.sha256("\x1f".join(tokens).encode()).hexdigest()


def segment_key(pair: str, split_sentences: bool, text: str) -> str:
    """Return the cache key of a whole segment: the hash of its pair, its sentence option
    and its exact text.

    Workers store these beside the piece entries, so the web, which has no tokenizer,
    can answer a job whose every segment was translated before without a worker
    (stapel.submit). No normalization: a segment's translation keeps its own whitespace.
    The leading tag keeps these keys apart from piece keys.
    """
    head = f"segment\x1e{pair}\x1e{int(split_sentences)}\x1e"
    return hashlib.sha256((head + text).encode()).hexdigest()


def fingerprint(model_dir: Path, options: dict) -> str:
    """Return a model's fingerprint: its files' contents and the output-changing options."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(model_dir).iterdir() if p.is_file()):
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
    digest.update(json.dumps(options, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def pair_fingerprint(model_fp: str, source: str, target: str) -> str:
    """Return what keys one pair's entries of a multilingual model: its fingerprint with
    the two languages (one model, many targets: one target never answers another)."""
    return hashlib.sha256(f"{model_fp}\x1e{source}\x1e{target}".encode()).hexdigest()[:16]


def scope(tenant_id: str, shared: bool) -> str:
    """Return the scope a tenant's entries live in."""
    return SHARED_SCOPE if shared else tenant_id


_ENTRIES = CacheEntry.__table__
_LOOKUP = select(_ENTRIES.c.key, _ENTRIES.c.target, _ENTRIES.c.score).where(
    # an entry stored before scores is a miss: every hit carries its score
    _ENTRIES.c.score.is_not(None),
    _ENTRIES.c.scope == bindparam("m_scope"),
    _ENTRIES.c.fingerprint == bindparam("m_fp"),
    _ENTRIES.c.key.in_(bindparam("m_keys", expanding=True)),
    _ENTRIES.c.created_at > DbNow(bindparam("m_age", type_=Float())),
)


def _upsert(make):
    statement = make(_ENTRIES).values(
        scope=bindparam("m_scope"),
        fingerprint=bindparam("m_fp"),
        key=bindparam("m_key"),
        target=bindparam("m_target"),
        score=bindparam("m_score"),
        created_at=db_now(),
    )
    excluded = statement.excluded
    return statement.on_conflict_do_update(
        index_elements=["scope", "fingerprint", "key"],
        set_={
            "target": excluded.target,
            "score": excluded.score,
            "created_at": excluded.created_at,
        },
    )


_UPSERTS = {"postgresql": _upsert(postgresql.insert), "sqlite": _upsert(sqlite.insert)}
"""One upsert per dialect, built once and run for many rows (executemany)."""


def lookup(
    session: Session, scope_: str, fp: str, keys: Iterable[str], ttl_s: float
) -> dict[str, str]:
    """Return key -> target for the keys cached in scope for fp and not expired; each
    target is a stapel.scores.Scored that carries its score."""
    wanted = sorted(set(keys))
    found: dict[str, str] = {}
    params = {"m_scope": scope_, "m_fp": fp, "m_age": -float(ttl_s)}
    conn = session.connection()  # a Core select: no ORM layer per call
    for start in range(0, len(wanted), LOOKUP_BATCH):
        rows = conn.execute(_LOOKUP, params | {"m_keys": wanted[start : start + LOOKUP_BATCH]})
        found.update((key, Scored(target, score)) for key, target, score in rows)
    return found


def store(session: Session, scope_: str, fp: str, learned: dict[str, str]) -> None:
    """Upsert key -> target entries (in the caller's transaction; it commits), each with
    the score its target carries (stapel.scores.score_of)."""
    if not learned:
        return
    rows = [
        {"m_scope": scope_, "m_fp": fp, "m_key": k, "m_target": str(t), "m_score": score_of(t)}
        for k, t in sorted(learned.items())  # one order: concurrent upserts never deadlock
    ]
    session.execute(_UPSERTS[session.get_bind().dialect.name], rows)


def purge(session: Session, scope_: str) -> int:
    """Delete every entry of a scope (a tenant, or SHARED_SCOPE); return how many."""
    result = session.execute(delete(CacheEntry).where(CacheEntry.scope == scope_))
    session.commit()
    count = int(getattr(result, "rowcount", 0) or 0)
    log.info("mt cache purged scope=%s count=%d", scope_, count)
    return count


def purge_expired(session: Session, ttl_s: float) -> int:
    """Delete the entries older than ttl_s (through ix_mt_cache_created); return how many."""
    result = session.execute(delete(CacheEntry).where(CacheEntry.created_at <= db_now(-ttl_s)))
    session.commit()
    count = int(getattr(result, "rowcount", 0) or 0)
    if count:
        log.info("mt cache expired entries purged count=%d ttl_s=%g", count, ttl_s)
    return count
