"""Translation memories: a tenant's human translations, whose exact matches win.

A memory holds the translation units of one TMX file for one language pair, keyed by
the hash of the normalized source (`normalize`: Unicode NFC, runs of whitespace made one
space, the ends stripped). A job that names memories gets, for each segment whose
normalized source one of them holds, that memory's target instead of the cache's or
the model's (the first named memory that has it wins). A tenant sees, names and matches
only its own memories.
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence

from sqlalchemy import delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from stapel.exceptions import NotFound, QuotaFull, ValidationError
from stapel.formats import tmxread
from stapel.tables import Memory, MemoryEntry, db_now, is_id, new_id

log = logging.getLogger(__name__)

_SPACES = re.compile(r"\s+")

LOOKUP_BATCH = 900
"""Keys per lookup statement (SQLite's default limit is 999 bound parameters)."""


def normalize(text: str) -> str:
    """Return the form a memory matches on: NFC, whitespace runs as one space, stripped."""
    return _SPACES.sub(" ", unicodedata.normalize("NFC", text)).strip()


def source_key(text: str) -> str:
    """Return the key of a source in a memory: the hash of its normalized form."""
    return hashlib.sha256(normalize(text).encode()).hexdigest()


def check_named(
    session: Session, tenant_id: str, ids: Sequence[str], pair: tuple[str, str]
) -> None:
    """Refuse a job naming a memory that is not the tenant's (404) or of another pair (400)."""
    if not ids:
        return
    found = dict(
        session.execute(
            select(Memory.id, Memory.source_lang + "-" + Memory.target_lang).where(
                Memory.id.in_(list(ids)), Memory.tenant_id == tenant_id
            )
        ).all()
    )
    session.rollback()
    for memory_id in ids:
        if memory_id not in found:
            raise NotFound(f"no memory with id {memory_id!r}")
        if found[memory_id] != f"{pair[0]}-{pair[1]}":
            raise ValidationError(
                f"memory {memory_id} is for {found[memory_id]}, the job is {pair[0]}-{pair[1]}",
                code="memory_pair_mismatch",
            )


def usable(session: Session, tenant_id: str, ids: Sequence[str], pair: tuple[str, str]) -> list:
    """Return the ids of those memories that are the tenant's and of the job's pair."""
    if not ids:
        return []
    mine = set(
        session.scalars(
            select(Memory.id).where(
                Memory.id.in_(list(ids)),
                Memory.tenant_id == tenant_id,
                Memory.source_lang == pair[0],
                Memory.target_lang == pair[1],
            )
        )
    )
    return [i for i in ids if i in mine]


def lookup(
    session: Session,
    tenant_id: str,
    memory_ids: Sequence[str],
    items: Iterable[tuple[int, str]],
    pair: tuple[str, str],
) -> dict[int, str]:
    """Return index -> target for the (index, source) items a named memory matches.

    Only the tenant's own memories of the pair answer, whatever ids the job names.
    """
    ids = usable(session, tenant_id, memory_ids, pair)
    if not ids:
        return {}
    keyed: dict[str, list[int]] = {}
    for index, source in items:
        if source.strip():
            keyed.setdefault(source_key(source), []).append(index)
    rank = {memory_id: n for n, memory_id in enumerate(ids)}
    best: dict[str, tuple[int, str]] = {}
    keys = sorted(keyed)
    for start in range(0, len(keys), LOOKUP_BATCH):
        rows = session.execute(
            select(MemoryEntry.key, MemoryEntry.memory_id, MemoryEntry.target).where(
                MemoryEntry.memory_id.in_(ids),
                MemoryEntry.key.in_(keys[start : start + LOOKUP_BATCH]),
            )
        )
        for key, memory_id, target in rows:
            if key not in best or rank[memory_id] < best[key][0]:
                best[key] = (rank[memory_id], target)
    return {index: target for key, (_, target) in best.items() for index in keyed[key]}


IMPORT_BATCH = 1000
"""Translation units inserted per statement while a TMX file is read."""


def create(
    session: Session,
    tenant_id: str,
    stream: tmxread.Readable,
    pair: tuple[str, str],
    *,
    name: str | None,
    quota_entries: int,
) -> Memory:
    """Import a TMX stream as a new memory of the tenant: one transaction, or nothing.

    Raises ValidationError (400, with line and column) for a malformed TMX or one whose
    languages do not match the pair, QuotaFull (429) when the tenant's memories would
    hold more than quota_entries units (the limit is named).
    """
    used = session.scalar(
        select(func.coalesce(func.sum(Memory.entries), 0)).where(Memory.tenant_id == tenant_id)
    )
    room = quota_entries - int(used or 0)
    memory = Memory(
        id=new_id(),
        tenant_id=tenant_id,
        name=name,
        source_lang=pair[0],
        target_lang=pair[1],
        entries=0,
        chars=0,
        created_at=session.scalar(select(db_now())),
    )
    session.add(memory)
    session.flush()
    batch: dict[str, tuple[str, str]] = {}
    try:
        for source, target in tmxread.units(stream, *pair):
            if not source.strip():
                continue
            batch[source_key(source)] = (source, target)
            if len(batch) >= IMPORT_BATCH:
                memory.entries += _insert(session, memory, batch)
                batch = {}
            if memory.entries + len(batch) > room:
                raise QuotaFull(
                    f"the tenant's memories may hold {quota_entries} translation units "
                    f"(STAPEL_MEMORY_QUOTA_ENTRIES); {used} are stored",
                    code="memory_quota_exceeded",
                )
        memory.entries += _insert(session, memory, batch)
    except tmxread.BadTmx as exc:
        session.rollback()
        raise ValidationError(str(exc), code="invalid_tmx") from None
    except Exception:
        session.rollback()
        raise
    memory.entries = int(
        session.scalar(
            select(func.count()).select_from(MemoryEntry).where(MemoryEntry.memory_id == memory.id)
        )
        or 0
    )
    session.commit()
    log.info(
        "memory created tenant=%s memory=%s pair=%s-%s entries=%d",
        tenant_id,
        memory.id,
        pair[0],
        pair[1],
        memory.entries,
    )
    return memory


def _insert(session: Session, memory: Memory, batch: dict[str, tuple[str, str]]) -> int:
    """Upsert a batch of units (a source seen again in the file: the later one wins)."""
    if not batch:
        return 0
    make = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    statement = make(MemoryEntry).values(
        [
            {"memory_id": memory.id, "key": key, "source": s, "target": t}
            for key, (s, t) in batch.items()
        ]
    )
    statement = statement.on_conflict_do_update(
        index_elements=["memory_id", "key"],
        set_={"source": statement.excluded.source, "target": statement.excluded.target},
    )
    session.execute(statement)
    memory.chars += sum(len(s) + len(t) for s, t in batch.values())
    return len(batch)


def get(session: Session, tenant_id: str, memory_id: str) -> Memory:
    """Return the tenant's memory, or raise NotFound (also for another tenant's)."""
    memory = (
        session.scalar(select(Memory).where(Memory.id == memory_id, Memory.tenant_id == tenant_id))
        if is_id(memory_id)
        else None
    )
    if memory is None:
        raise NotFound(f"no memory with id {memory_id!r}")
    return memory


def list_for(session: Session, tenant_id: str) -> list[Memory]:
    """Return the tenant's memories, newest first."""
    return list(
        session.scalars(
            select(Memory)
            .where(Memory.tenant_id == tenant_id)
            .order_by(Memory.created_at.desc(), Memory.id.desc())
        )
    )


def delete_memory(session: Session, tenant_id: str, memory_id: str) -> None:
    """Delete the tenant's memory and its units (404 for another tenant's)."""
    memory = get(session, tenant_id, memory_id)
    session.execute(delete(MemoryEntry).where(MemoryEntry.memory_id == memory.id))
    session.delete(memory)
    session.commit()
    log.info("memory deleted tenant=%s memory=%s", tenant_id, memory_id)


def iter_units(session: Session, memory_id: str, page: int = 2000) -> Iterator[tuple[str, str]]:
    """Yield a memory's (source, target) units by key, each page its own short read."""
    after = ""
    while True:
        rows = session.execute(
            select(MemoryEntry.key, MemoryEntry.source, MemoryEntry.target)
            .where(MemoryEntry.memory_id == memory_id, MemoryEntry.key > after)
            .order_by(MemoryEntry.key)
            .limit(page)
        ).all()
        session.rollback()
        if not rows:
            return
        yield from ((source, target) for _, source, target in rows)
        after = rows[-1][0]
