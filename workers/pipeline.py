"""One chunk's trip through a worker: budget, claim, translate, write, finish or fail.

The steps run in order, each handing on to the next: `run_chunk` takes room in the
worker's budget (or hands the chunk back), claims it (or skips it), translates its
pending segments batch by batch with a heartbeat per batch, and finishes it; a failure
requeues or fails the chunk. A chunk whose model does not load on this worker is given
back unclaimed for another worker (workers/unavailable.py); a chunk that is cancelled or
requeued meanwhile takes its waiting segments out of the batcher at once. The claim
(with the pending segments) and the finish run in groups with the other tasks' in the
worker's committer (workers/committer.py); each task still gets its own outcome.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from celery import Celery
from sqlalchemy import select
from sqlalchemy.orm import Session

from stapel import logs, memories, metrics, mtcache
from stapel.broker import URGENT_PRIORITY, fast_lane, send_callback
from stapel.chunks import (
    Claim,
    Learned,
    Written,
    chunk_size,
    fail_chunk,
    record_batch,
)
from stapel.db import with_retry
from stapel.dispatch import dispatch
from stapel.exceptions import ModelUnavailable, PermanentTranslationError
from stapel.formats import inline
from stapel.interactive import announce_end
from stapel.presence import Room
from stapel.scores import MEMORY_SCORE, Scored, score_of
from stapel.segment_errors import record_failures
from stapel.states import ChunkOutcome, Origin, TaskOutcome
from stapel.tables import Chunk
from workers import markup
from workers.batcher import Known
from workers.pivoting import PivotSubmission
from workers.runtime import WorkerState, state
from workers.submission import Result, SegmentError, Submission
from workers.unavailable import model_unavailable

log = logging.getLogger(__name__)


def run_chunk(
    celery: Celery,
    chunk_id: str,
    worker: str,
    queue: str = "",
    segments: int | None = None,
    place: tuple[int, str] = (0, ""),
    interactive: bool = False,
) -> str:
    """Claim, translate and finish one chunk; return what happened, for the task result.

    `place` is the message's (broker priority, task id): its place in the budget's line.
    An interactive chunk (a caller waits on it) skips the worker's segment budget: it is
    a few segments the batcher serves first, and handing it back would only delay it. So
    does a small chunk of the most urgent priority (stapel.broker.URGENT_UP_TO): behind a
    bulk job that fills the budget it would otherwise wait in line for a whole bulk
    chunk to end; the worker's task threads bound how many such chunks it holds.
    """
    # place[0] is broker_priority's (0 for the API's 9 and the lane's 10): back to the API's
    urgent = segments is not None and fast_lane(URGENT_PRIORITY - place[0], segments)
    current = state()
    with current.lock:
        current.busy += 1
    try:
        with current.sessions() as session:
            return _run_chunk(
                current,
                celery,
                session,
                chunk_id,
                worker,
                queue,
                0 if interactive or urgent else segments,
                place,
                interactive or urgent,
            )
    finally:
        with current.lock:
            current.busy -= 1


def _run_chunk(
    current: WorkerState,
    celery: Celery,
    session: Session,
    chunk_id: str,
    worker: str,
    queue: str,
    segments: int | None,
    place: tuple[int, str],
    fast: bool = False,
) -> str:
    if segments is None:
        segments = with_retry(session, lambda: chunk_size(session, chunk_id))
        session.commit()
    if segments and not current.hold(segments, current.settings.defer_s, *place):
        return _hand_back(current, celery, session, chunk_id)
    try:
        claimed = current.committer.claim(chunk_id, worker, fast)  # with the others waiting
        if claimed is None:
            return _skipped(session, chunk_id, worker)
        claim, pending = claimed
        with logs.job_context(claim.job_id, claim.chunk_idx):
            outcome = _run_claimed(current, celery, session, claim, pending, worker, queue)
        if outcome != ChunkOutcome.JOB_SUCCEEDED:  # a finish is announced with its group
            announce_end(current.redis, claim.job_id, outcome)
        metrics.CHUNKS.labels(current.settings.pool, outcome).inc()
        return outcome
    finally:
        current.release(segments)


def _skipped(session: Session, chunk_id: str, worker: str) -> str:
    job_id = with_retry(
        session, lambda: session.scalar(select(Chunk.job_id).where(Chunk.id == chunk_id))
    )
    log.info(
        "chunk not claimable, skipping logid=%s chunk_id=%s worker=%s",
        job_id or "-",
        chunk_id,
        worker,
    )
    return TaskOutcome.SKIPPED


def _hand_back(current: WorkerState, celery: Celery, session: Session, chunk_id: str) -> str:
    """Send a chunk this worker has no room for to its pool queue, for any worker.

    `hold` gives up only when another worker of the pool has room for it (or this one
    is stopping), so a saturated pool hands nothing back. No room is passed: a hand-back
    always goes to the pool queue (stapel.dispatch.route), which every worker of the pool
    consumes. The task id is recorded so the watchdog sees the chunk as waiting.
    """
    sent = with_retry(session, lambda: dispatch(session, celery, Room(), chunk_ids=[chunk_id]))
    if not sent:  # claimed or ended meanwhile (or the broker is down: the watchdog)
        return TaskOutcome.SKIPPED
    log.info("chunk deferred: worker full logid=%s chunk_id=%s", sent[0].job_id, chunk_id)
    return TaskOutcome.DEFERRED


def _run_claimed(
    current: WorkerState,
    celery: Celery,
    session: Session,
    claim: Claim,
    pending: list[tuple[int, str]],
    worker: str,
    queue: str,
) -> str:
    if claim.sent_at is not None and claim.claimed_at is not None:  # both the DB's clock
        waited = (claim.claimed_at - claim.sent_at).total_seconds()
        metrics.observe_stage("queue_wait", max(0.0, waited))
    log.info(
        "chunk claimed logid=%s chunk=%d attempt=%d worker=%s queue=%s",
        claim.job_id,
        claim.chunk_idx,
        claim.attempt,
        worker,
        queue,
    )
    try:
        return _translate(current, celery, session, claim, pending)
    except ModelUnavailable as exc:
        return model_unavailable(current, celery, session, claim, exc, worker)
    except PermanentTranslationError as exc:
        return _fail(current, celery, session, claim, str(exc), retry=False)
    except (RuntimeError, ValueError) as exc:
        log.exception("chunk translation error logid=%s chunk=%d", claim.job_id, claim.chunk_idx)
        return _fail(current, celery, session, claim, f"{type(exc).__name__}: {exc}", retry=True)


def _translate(
    current: WorkerState,
    celery: Celery,
    session: Session,
    claim: Claim,
    pending: list[tuple[int, str]],
) -> str:
    """Translate the claimed chunk's pending segments (read with its claim) and finish it.

    No transaction stays open while the segments wait in the batcher: 64 waiting tasks
    holding pooled connections would drain the pool and stall every other claim.
    """
    started = time.monotonic()
    settings = current.settings
    cached = current.engine.is_loaded(claim.pair)
    metrics.MODEL_CACHE.labels(claim.pair, "hit" if cached else "miss").inc()
    # a model that takes long to load must not cost this chunk its claim: heartbeat meanwhile
    if not cached and not current.engine.wait_loaded(
        claim.pair,
        settings.beat_s,
        lambda: with_retry(session, lambda: record_batch(session, claim, [])),
    ):
        return _stopped(claim)
    fp = current.engine.fingerprint(claim.pair)
    recall = _recall(session, claim, pending)
    rest = [(i, text) for i, text in pending if i not in recall]
    lookups = _Lookups(session, claim, settings, fp, rest)
    whole = lookups.tagged_hits(rest)
    rest = [(i, text) for i, text in rest if i not in whole]
    batches = current.engine.translate_batches(
        claim.pair,
        rest,
        priority=claim.priority,
        job_id=claim.job_id,
        tick_s=settings.heartbeat_s,
        split_sentences=claim.split_sentences,
        known=lookups.known if lookups.on else None,
        cache_under=lookups.under if lookups.cache else None,
    )
    held: list[Written] = [
        (i, t, Origin.MEMORY.value, None, MEMORY_SCORE) for i, t in sorted(recall.items())
    ]
    held += [(i, t, Origin.CACHE.value, fp, score_of(t)) for i, t in sorted(whole.items())]
    try:
        try:
            last, failed = _write_parts(current, session, claim, batches, len(rest), lookups, held)
        finally:
            batches.withdraw()  # a stop or an error: its waiting segments leave the batcher
        outcome = None
        if last is not None:  # one transaction: the chunk's end and, with the last chunk, the job's
            finish = partial(current.committer.finish, claim, last)  # with the others waiting
            outcome = _write(session, batches, lookups, finish, retried=False)
    finally:
        batches.release()  # a stop or an error: nothing more will be written
    if outcome is None or outcome == ChunkOutcome.LOST:
        return _stopped(claim)
    if outcome == ChunkOutcome.JOB_SUCCEEDED and claim.has_callback:
        send_callback(celery, claim.job_id)
    log.info(
        "chunk done logid=%s chunk=%d segments=%d failed=%d memory=%d reused_pieces=%d "
        "seconds=%.2f job=%s",
        claim.job_id,
        claim.chunk_idx,
        len(pending),
        failed,
        len(recall),
        lookups.hits + len(whole),
        time.monotonic() - started,
        "succeeded" if outcome == ChunkOutcome.JOB_SUCCEEDED else "running",
    )
    return outcome


T = TypeVar("T")

Batches = Submission | markup.TaggedSubmission | PivotSubmission
"""What Engine.translate_batches returns: plain segments' or tagged segments' batches."""


def _write(
    session: Session,
    batches: Batches,
    lookups: _Lookups,
    write: Callable[[Learned | None], T],
    *,
    retried: bool = True,
) -> T:
    """Run one write of the chunk's translations, given the model's new cache entries since
    the last (retried while the database is unreachable, unless the writer retries itself:
    the committer); then the batcher lets go of what it held for them."""
    write_started = time.monotonic()
    learned = lookups.learned(batches)
    written = with_retry(session, lambda: write(learned)) if retried else write(learned)
    metrics.observe_stage("write", time.monotonic() - write_started)
    batches.release()  # written: a repeat now finds the cache
    return written


_MACHINE = (Origin.CACHE.value, Origin.MT.value)


def _recall(session: Session, claim: Claim, pending: list[tuple[int, str]]) -> dict[int, str]:
    """The chunk's segments an exact match of a memory the job names answers (one query)."""
    if not claim.memories or not pending:
        return {}
    pair = (claim.pair.split("-", 1)[0], claim.pair.split("-", 1)[1])
    found = with_retry(
        session,
        lambda: memories.lookup(session, claim.tenant_id, claim.memories, pending, pair),
    )
    session.commit()
    metrics.observe_lookup("memory", len(found), len(pending))
    return found


class _Lookups:
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
        found = with_retry(
            session,
            lambda: mtcache.lookup(session, self.scope, self.fp, keys.values(), self.ttl_s),
        )
        session.commit()
        metrics.observe_lookup("cache", len(found), len(set(keys.values())))
        hits = {i: found[key] for i, key in keys.items() if key in found}
        self._watch([(i, text) for i, text in rest if i not in hits])  # what goes on
        return hits

    def known(self, pieces: list[tuple[str, str]]) -> dict[str, tuple[str, str]]:
        """Look the pieces up: a named memory's exact match first, then the cache (one
        query each; the batcher calls this at submit)."""
        session, claim = self.session, self.claim
        found: dict[str, tuple[str, str]] = {}
        if claim.memories:
            source, _, target = claim.pair.partition("-")
            pair = (source, target)
            numbered = list(enumerate(text for _, text in pieces))
            recalled = with_retry(
                session,
                lambda: memories.lookup(session, claim.tenant_id, claim.memories, numbered, pair),
            )
            found = {pieces[n][0]: (target, Origin.MEMORY.value) for n, target in recalled.items()}
            metrics.observe_lookup("memory", len(recalled), len(pieces))
        keys = [key for key, _ in pieces if key not in found]
        if self.cache and keys:
            cached = with_retry(
                session, lambda: mtcache.lookup(session, self.scope, self.fp, keys, self.ttl_s)
            )
            found.update((k, (t, Origin.CACHE.value)) for k, t in cached.items())
            metrics.observe_lookup("cache", len(cached), len(keys))
        session.commit()  # no transaction stays open while the pieces wait
        self.hits = sum(key in found for key, _ in pieces)
        return found

    def under(self, fp: str) -> Known:
        """The cache lookup of one step of a pivot pair, under its own model's fingerprint."""

        def known(pieces: list[tuple[str, str]]) -> dict[str, tuple[str, str]]:
            session, keys = self.session, [key for key, _ in pieces]
            cached = with_retry(
                session, lambda: mtcache.lookup(session, self.scope, fp, keys, self.ttl_s)
            )
            session.commit()
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


HOLD_UP_TO = 64
"""A chunk with at most this many segments to translate writes them once, with its finish
(or earlier, when half the heartbeat period passes first); a larger chunk writes each part
as it comes: its progress, and a lost claim noticed within a batch (the watchdog's resend
must not find its pieces still waiting)."""


def _write_parts(
    current: WorkerState,
    session: Session,
    claim: Claim,
    batches: Batches,
    left: int,
    lookups: _Lookups,
    held: list[Written],
) -> tuple[list[Written] | None, int]:
    """Write the translated parts as they come, with a heartbeat; keep the last ones back.

    A small chunk (HOLD_UP_TO) holds its parts until its end or until half the heartbeat
    period has passed since the last write (a quiet tick writes the heartbeat alone).
    Returns (what is left to write with the chunk's finish, how many segments failed
    alone), or (None, ...) when the claim was lost or the work withdrawn.
    """
    settings, failed = current.settings, 0
    if left == 0:
        return held, failed
    small = left + len(held) <= HOLD_UP_TO
    written_at = time.monotonic()
    for part in batches:
        # A quiet tick heartbeats only while the model's batcher is getting through
        # work: a hung translation must stop the heartbeats so the watchdog acts.
        if not part and not batches.batcher.progressing(settings.heartbeat_timeout_s / 2):
            continue
        left -= len(part)
        texts, failures = _split_results(part)
        failed += len(failures)
        if failures:
            with_retry(session, partial(record_failures, session, claim, failures))
        if texts:
            metrics.observe_segments(settings.pool, claim.pair, len(texts))
        held = held + lookups.provenance(batches, texts)
        if left == 0:
            return held, failed
        if small and time.monotonic() - written_at < settings.beat_s / 2:
            continue
        owned = _write(session, batches, lookups, partial(record_batch, session, claim, held))
        held, written_at = [], time.monotonic()
        if not owned:
            return None, failed
    return (None if left > 0 else held, failed)  # left > 0: withdrawn (a cancel announced)


def _split_results(
    part: list[tuple[int, Result]],
) -> tuple[list[tuple[int, str]], list[tuple[int, str, str]]]:
    """Split a delivered part into translations and (index, code, message) failures."""
    texts = [(i, r) for i, r in part if not isinstance(r, SegmentError)]
    failures = [(i, r.code, r.message) for i, r in part if isinstance(r, SegmentError)]
    return texts, failures


def _stopped(claim: Claim) -> str:
    log.info(
        "chunk stopped: cancelled or requeued logid=%s chunk=%d", claim.job_id, claim.chunk_idx
    )
    return TaskOutcome.STOPPED


def _fail(
    current: WorkerState, celery: Celery, session: Session, claim: Claim, error: str, *, retry: bool
) -> str:
    outcome = with_retry(
        session,
        lambda: fail_chunk(
            session, claim, error, retry=retry, max_attempts=current.settings.max_attempts
        ),
    )
    log.warning(
        "chunk %s logid=%s chunk=%d error=%s", outcome, claim.job_id, claim.chunk_idx, error
    )
    if outcome == ChunkOutcome.REQUEUED:
        dispatch(session, celery, current.served.get(), job_id=claim.job_id, only_unsent=True)
    elif outcome == ChunkOutcome.JOB_FAILED and claim.has_callback:
        send_callback(celery, claim.job_id)
    return outcome
