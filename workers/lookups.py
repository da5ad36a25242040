"""A chunk's lookups before the model: a named memory's exact matches, the MT cache's
whole segments and pieces; and what the model adds to the cache, stored with the
chunk's writes."""

from __future__ import annotations

from functools import partial

from sqlalchemy.orm import Session

from stapel import memories, metrics, mtcache
from stapel.chunks import Claim, Learned, Written
from stapel.db import read_retried, with_retry
from stapel.formats import inline
from stapel.scores import Scored
from stapel.states import Origin
from workers import markup
from workers.batcher import Known
from workers.pivoting import PivotSubmission
from workers.submission import Submission

Batches = Submission | markup.TaggedSubmission | PivotSubmission
"""What Engine.translate_batches returns: plain segments' or tagged segments' batches."""

_MACHINE = (Origin.CACHE.value, Origin.MT.value)


def recall(session: Session, claim: Claim, pending: list[tuple[int, str]]) -> dict[int, str]:
    """The chunk's segments an exact match of a memory the job names answers (one query)."""
    if not claim.memories or not pending:
        return {}
    pair = (claim.pair.split("-", 1)[0], claim.pair.split("-", 1)[1])
    found = read_retried(
        session,
        lambda: memories.lookup(session, claim.tenant_id, claim.memories, pending, pair),
    )
    metrics.observe_lookup("memory", len(found), len(pending))
    return found


class Lookups:
    """The chunk's pieces looked up once (memories, then the MT cache), and what the
    model adds to the cache: its pieces, and each whole segment under its text.

    A whole segment is stored only when it is all machine translation, never in a job
    that names memories (a sentence of it may be a human's). Segments with inline codes
    are cached whole only (their codes placed: the aligning batcher's pieces are not
    cached), and in a chunk that holds some, only they are: the segments without codes
    there went through the aligning batcher.
    """

    def __init__(
        self, session: Session, claim: Claim, settings, fp: str, rest: list[tuple[int, str]]
    ) -> None:
        self.session, self.claim, self.fp = session, claim, fp
        self.cache = settings.cache_enabled and claim.use_cache
        self.on = self.cache or bool(claim.memories)
        self.ttl_s = settings.cache_ttl_s
        self.scope = mtcache.scope(claim.tenant_id, settings.cache_shared)
        self.hits = 0
        self._segments: dict[str, str] = {}
        self._watch(rest)

    def _watch(self, rest: list[tuple[int, str]]) -> None:
        """Keep the sources of the segments to cache whole once translated (see above)."""
        self.tagged = markup.has_codes(rest)
        whole = self.cache and not self.claim.memories
        self._sources = {
            i: text for i, text in rest if whole and (not self.tagged or inline.has_codes(text))
        }

    def _key(self, text: str) -> str:
        return mtcache.segment_key(self.claim.pair, self.claim.split_sentences, text)

    def tagged_hits(self, rest: list[tuple[int, str]]) -> dict[int, str]:
        """The chunk's segments with inline codes the cache holds whole (one query)."""
        if not self.tagged or not self._sources:
            return {}
        keys = {i: self._key(text) for i, text in self._sources.items()}
        session = self.session
        found = read_retried(
            session,
            lambda: mtcache.lookup(session, self.scope, self.fp, keys.values(), self.ttl_s),
        )
        metrics.observe_lookup("cache", len(found), len(set(keys.values())))
        hits = {i: found[key] for i, key in keys.items() if key in found}
        self._watch([(i, text) for i, text in rest if i not in hits])  # what goes on
        return hits

    def known(self, pieces: list[tuple[str, str]]) -> dict[str, tuple[str, str]]:
        """Look the pieces up: a named memory's exact match first, then the cache (one
        query each; the batcher calls this at submit)."""
        session, claim = self.session, self.claim
        source, _, target = claim.pair.partition("-")

        def look() -> tuple[dict[int, str], list[str], dict[str, str]]:
            recalled: dict[int, str] = {}
            if claim.memories:
                numbered = list(enumerate(text for _, text in pieces))
                pair = (source, target)
                recalled = memories.lookup(session, claim.tenant_id, claim.memories, numbered, pair)
            remembered = {pieces[n][0] for n in recalled}
            keys = [key for key, _ in pieces if key not in remembered]
            cached = {}
            if self.cache and keys:
                cached = mtcache.lookup(session, self.scope, self.fp, keys, self.ttl_s)
            return recalled, keys, cached

        # one transaction for both, ended before the pieces wait
        recalled, keys, cached = read_retried(session, look)
        found = {pieces[n][0]: (target, Origin.MEMORY.value) for n, target in recalled.items()}
        if claim.memories:
            metrics.observe_lookup("memory", len(recalled), len(pieces))
        found.update((k, (t, Origin.CACHE.value)) for k, t in cached.items())
        if self.cache and keys:
            metrics.observe_lookup("cache", len(cached), len(keys))
        self.hits = sum(key in found for key, _ in pieces)
        return found

    def under(self, fp: str) -> Known:
        """The cache lookup of one step of a pivot pair, under its own model's fingerprint."""

        def known(pieces: list[tuple[str, str]]) -> dict[str, tuple[str, str]]:
            session, keys = self.session, [key for key, _ in pieces]
            cached = read_retried(
                session, lambda: mtcache.lookup(session, self.scope, fp, keys, self.ttl_s)
            )
            metrics.observe_lookup("cache", len(cached), len(keys))
            return {key: (target, Origin.CACHE.value) for key, target in cached.items()}

        return known

    def learned(self, batches: Batches) -> Learned | None:
        """The model's new piece translations since the last call, to store with a write
        (a pivot pair's steps store theirs, each under its model, in their own commit)."""
        if not self.cache:
            return None
        if isinstance(batches, PivotSubmission):
            for fp, learned in batches.take_step_learned().items():
                with_retry(self.session, partial(self._store, fp, learned))
        entries = batches.take_learned()
        entries.update(self._segments)
        self._segments = {}
        return Learned(self.scope, self.fp, entries) if entries else None

    def _store(self, fp: str, entries: dict[str, str]) -> None:
        mtcache.store(self.session, self.scope, fp, entries)
        self.session.commit()

    def provenance(self, batches: Batches, texts: list[tuple[int, str]]) -> list[Written]:
        """Each translated segment with its origin, the fingerprint of a machine one and its
        score (and, kept for the next `learned`, the whole machine-made segments to store)."""
        origins, scores = batches.origins, batches.scores
        for i, t in texts:
            if i in self._sources and origins.get(i) in _MACHINE:
                self._segments[self._key(self._sources[i])] = Scored(t, scores.get(i))
        return [
            (i, t, origins.get(i), self.fp if origins.get(i) in _MACHINE else None, scores.get(i))
            for i, t in texts
        ]
