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
import re
import unicodedata
from collections.abc import Iterable, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from stapel.tables import Memory, MemoryEntry

_SPACES = re.compile(r"\s+")

LOOKUP_BATCH = 900
"""Keys per lookup statement (SQLite's default limit is 999 bound parameters)."""


def normalize(text: str) -> str:
    """Return the form a memory matches on: NFC, whitespace runs as one space, stripped."""
    return _SPACES.sub(" ", unicodedata.normalize("NFC", text)).strip()


def source_key(text: str) -> str:
    """Return the key of a source in a memory: the hash of its normalized form."""
    return hashlib.sha256(normalize(text).encode()).hexdigest()


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
