"""Chunks' trips through a worker: budget, claim, translate, write, finish or fail.

`run_chunk` takes room in the worker's budget for one chunk (or hands it back) and
claims it (or skips it); `run_taken` does both at once for the chunks a task took along
(workers/takealong.py). Then the claimed chunks go through their steps together, on one
thread: each is looked up and its pending segments go into the batcher, then each
receives its batches (with a heartbeat per batch), then all finish in one committer
request (workers/committer.py). A chunk's failure stays its own: a step that raises ends
that chunk only (requeued or failed as alone), the others go on. A chunk whose model
does not load on this worker is given back unclaimed for another worker
(workers/unavailable.py); a chunk that is cancelled or requeued meanwhile takes its
waiting segments out of the batcher at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from celery import Celery
from sqlalchemy import select
from sqlalchemy.orm import Session

from stapel import logs, metrics
from stapel.broker import URGENT_PRIORITY, fast_lane, send_callback
from stapel.chunk_groups import Finish, Pending
from stapel.chunks import Claim, Learned, Written, chunk_size, fail_chunk, record_batch
from stapel.db import read_retried, with_retry
from stapel.dispatch import dispatch
from stapel.exceptions import ModelUnavailable
from stapel.interactive import announce_ends, waited_on
from stapel.presence import Room
from stapel.scores import MEMORY_SCORE, score_of
from stapel.segment_errors import record_failures
from stapel.states import ChunkOutcome, Origin, TaskOutcome
from stapel.tables import Chunk
from workers import markup
from workers.batcher import Request
from workers.budget import Held
from workers.lookups import Batches, Lookups, recall
from workers.runtime import WorkerState, state
from workers.submission import Result, SegmentError
from workers.takealong import Taken
from workers.unavailable import model_unavailable, send_back

log = logging.getLogger(__name__)

Outcome = str | BaseException
"""What became of one chunk: its outcome, or what it raised (as its task would have)."""
Spawn = Callable[[Callable[[], list[Outcome]]], "Future[list[Outcome]] | None"]
"""Runs a function on another thread (the take-along's)."""


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
            outcome = _run_chunk(
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
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


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
) -> Outcome:
    if segments is None:
        segments = read_retried(session, lambda: chunk_size(session, chunk_id))
    if segments and not current.hold(segments, current.settings.defer_s, *place):
        return _hand_back(current, celery, session, chunk_id)
    try:
        claimed = current.committer.claim(chunk_id, worker, fast)  # with the others waiting
        if claimed is None:
            return _skipped(session, chunk_id, worker)
        return _run_claimed(current, celery, session, [claimed], worker, queue)[0]
    finally:
        current.release(segments)


def run_taken(
    celery: Celery, taken: Sequence[Taken], held: Held, worker: str, queue: str, spawn: Spawn
) -> list[Outcome]:
    """Run a task's chunk (first) and the chunks it took along as one unit, in the room
    `held` in the worker's budget for them (what they do not need is given back at once,
    the rest when they end):
    one claim request, their steps together on this thread, one finish request; return
    an outcome for each, in order.

    A taken chunk whose model is not loaded yet goes on alone on a thread of `spawn`, so
    the others do not wait for the load (one whose model is refused here stays: it is
    handed back or fails at once; with no thread free it stays too, and the unit waits
    for the load with every claim heartbeating).
    """
    current = state()
    held.keep(sum(message.segments for message in taken))
    with current.lock:
        current.busy += len(taken)
    try:
        with current.sessions() as session:
            urgent = any(
                m.interactive or fast_lane(URGENT_PRIORITY - m.priority, m.segments) for m in taken
            )
            claims = current.committer.claim_many([m.chunk_id for m in taken], worker, urgent)
            outcomes: dict[int, Outcome] = {}
            won: list[tuple[int, tuple[Claim, Pending]]] = []
            for n, (message, claimed) in enumerate(zip(taken, claims, strict=True)):
                if claimed is None:
                    outcomes[n] = _caught(
                        session, partial(_skipped, session, message.chunk_id, worker)
                    )
                elif isinstance(claimed, BaseException):
                    outcomes[n] = claimed
                else:
                    won.append((n, claimed))
            ran = _run_claimed(current, celery, session, [c for _, c in won], worker, queue, spawn)
            for (n, _), outcome in zip(won, ran, strict=True):
                outcomes[n] = outcome
    finally:
        held.release()
        with current.lock:
            current.busy -= len(taken)
    return [outcomes[n] for n in range(len(taken))]


def _caught(session: Session, step: Callable[[], str]) -> Outcome:
    try:
        return step()
    except Exception as exc:  # the chunk's own: its task would have raised it
        session.rollback()  # the unit's next chunk finds the session usable
        return exc


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


@dataclass
class _Run:
    """One claimed chunk on its way through the steps."""

    claim: Claim
    pending: Pending
    started: float = field(default_factory=time.monotonic)
    lookups: Lookups | None = None
    batches: Batches | None = None
    rest: Pending = field(default_factory=list)
    """Segments for the model (neither a memory's nor the cache's)."""
    held: list[Written] = field(default_factory=list)
    """Translations from memories and the cache, written with the rest."""
    recalled: int = 0
    reused: int = 0
    failed: int = 0
    last: list[Written] | None = None
    """What is left to write with the finish."""
    learned: Learned | None = None
    finished: Outcome | None = None
    """The finish's outcome (or what it raised)."""
    outcome: Outcome | None = None
    """Set once the chunk is done with (the later steps skip it)."""
    given_back: ModelUnavailable | None = None
    """Why the chunk was given back (sent again once the unit has ended)."""


def _run_claimed(
    current: WorkerState,
    celery: Celery,
    session: Session,
    claimed: Sequence[tuple[Claim, Pending]],
    worker: str,
    queue: str,
    spawn: Spawn | None = None,
) -> list[Outcome]:
    """Translate the claimed chunks' pending segments (read with their claims) and finish
    them; one outcome each.

    No transaction stays open while the segments wait in the batcher: 64 waiting tasks
    holding pooled connections would drain the pool and stall every other claim.
    """
    runs = [_Run(claim, pending) for claim, pending in claimed]
    alone: dict[int, Future[list[Outcome]]] = {}
    for n, run in enumerate(runs):
        if spawn is not None and n > 0 and _loads(current, run.claim.pair):
            future = spawn(partial(_go_on_alone, current, celery, run, worker, queue))
            if future is not None:  # else no thread is free: it stays, and waits here
                alone[n] = future
                run.outcome = TaskOutcome.STOPPED  # a placeholder: the steps here skip it
                continue
        _claimed(run.claim, worker, queue)
    step = partial(_step, current, celery, session, worker)
    try:
        _load_models(current, session, runs)
        for run in runs:
            step(run, partial(_begin, current, session))
        _submit(current, session, runs, step)
        for run in runs:
            step(run, partial(_gather, current, session))
        _finish(current, celery, session, worker, runs)
    finally:
        for run in runs:
            if run.batches is not None:
                run.batches.release()  # a stop or an error: nothing more will be written
    for run in runs:
        step(run, partial(_end, celery))
    here = [run for n, run in enumerate(runs) if n not in alone]
    # a job's end is announced (and counted) where its chunk ended; a finish with its group
    announce_ends(
        current.redis,
        [
            (run.claim.job_id, run.outcome)
            for run in here
            if isinstance(run.outcome, str)
            and run.outcome != ChunkOutcome.JOB_SUCCEEDED
            and waited_on(run.claim.priority)
        ],
    )
    for run in here:
        if isinstance(run.outcome, str):
            metrics.CHUNKS.labels(current.settings.pool, run.outcome).inc()
    given_back = [(run.claim, run.given_back) for run in here if run.given_back is not None]
    send_back(current, celery, session, given_back, worker)
    for n, future in alone.items():
        runs[n].outcome = future.result()[0]
    return [run.outcome if run.outcome is not None else TaskOutcome.STOPPED for run in runs]


def _loads(current: WorkerState, pair: str) -> bool:
    """Whether pair's model would load first (a refused one fails at once)."""
    return not current.engine.is_loaded(pair) and current.engine.refused(pair) is None


def _go_on_alone(
    current: WorkerState, celery: Celery, run: _Run, worker: str, queue: str
) -> list[Outcome]:
    with current.sessions() as session:
        return _run_claimed(current, celery, session, [(run.claim, run.pending)], worker, queue)


def _claimed(claim: Claim, worker: str, queue: str) -> None:
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


def _step(
    current: WorkerState,
    celery: Celery,
    session: Session,
    worker: str,
    run: _Run,
    action: Callable[[_Run], None],
) -> None:
    """Run one step of a chunk not done with yet; a failure ends this chunk only, as it
    would have ended its task (requeued, failed, handed back, or raised)."""
    if run.outcome is not None:
        return
    claim = run.claim
    with logs.job_context(claim.job_id, claim.chunk_idx):
        try:
            try:
                action(run)
            except ModelUnavailable as exc:
                run.outcome = model_unavailable(current, celery, session, claim, exc, worker)
                if run.outcome == TaskOutcome.UNAVAILABLE:
                    run.given_back = exc
            except (RuntimeError, ValueError) as exc:
                log.exception(
                    "chunk translation error logid=%s chunk=%d", claim.job_id, claim.chunk_idx
                )
                error = f"{type(exc).__name__}: {exc}"
                run.outcome = _fail(current, celery, session, claim, error)
        except Exception as exc:  # as its task would have raised it
            session.rollback()
            run.outcome = exc


def _load_models(current: WorkerState, session: Session, runs: list[_Run]) -> None:
    """Load the models the unit's chunks need, heartbeating every claim of the unit
    meanwhile: a model that takes long to load must cost no chunk its claim, neither
    its own chunks nor the others waiting with them. A load that raises is each of its
    chunks' to meet in _begin (a refused pair raises there at once)."""
    engine = current.engine
    live = [run for run in runs if run.outcome is None]
    for run in live:
        loaded = engine.is_loaded(run.claim.pair)
        metrics.MODEL_CACHE.labels(run.claim.pair, "hit" if loaded else "miss").inc()

    def beat() -> bool:
        for run in live:
            if run.outcome is None and not _heartbeat(session, run.claim):
                run.outcome = _stopped(run.claim)
        return any(run.outcome is None for run in live)

    for pair in dict.fromkeys(run.claim.pair for run in live):
        if not _loads(current, pair):
            continue
        try:
            engine.wait_loaded(pair, current.settings.beat_s, beat)
        except Exception:  # met again, and mapped, in each chunk's _begin
            session.rollback()  # a heartbeat's failure among them
        if not any(run.outcome is None for run in live):
            return


def _heartbeat(session: Session, claim: Claim) -> bool:
    """Heartbeat a claim with nothing written; False once it is lost."""
    return with_retry(session, partial(record_batch, session, claim, []))


def _begin(current: WorkerState, session: Session, run: _Run) -> None:
    """Look the chunk's segments up (memories, the cache's tagged segments); the rest go
    to the model's batcher next (_submit). Its model is loaded (_load_models), or its
    load raises here (ModelUnavailable: handed back or failed by _step)."""
    claim, settings = run.claim, current.settings
    # loaded, unless evicted since (then loaded again, heartbeating) or its load raised
    if not current.engine.wait_loaded(
        claim.pair, settings.beat_s, partial(_heartbeat, session, claim)
    ):
        run.outcome = _stopped(claim)
        return
    fp = current.engine.fingerprint(claim.pair)
    recalled = recall(session, claim, run.pending)
    rest = [(i, text) for i, text in run.pending if i not in recalled]
    lookups = run.lookups = Lookups(session, claim, settings, fp, rest)
    whole = lookups.tagged_hits(rest)
    run.rest = [(i, text) for i, text in rest if i not in whole]
    memory, cache = Origin.MEMORY.value, Origin.CACHE.value
    run.held = [(i, t, memory, None, MEMORY_SCORE) for i, t in sorted(recalled.items())]
    run.held += [(i, t, cache, fp, score_of(t)) for i, t in sorted(whole.items())]
    run.recalled, run.reused = len(recalled), len(whole)


def _submit(
    current: WorkerState, session: Session, runs: list[_Run], step: Callable[..., None]
) -> None:
    """Send the chunks' segments into their models' batchers: a plain pair's chunks
    together (one encode call, one lock: Engine.submit_plain); a pivot pair's, those with
    inline codes, and a group that fails (then each alone) one by one."""
    engine = current.engine
    plain: dict[str, list[_Run]] = {}
    for run in runs:
        if run.outcome is not None:
            continue
        if engine.plain(run.claim.pair) and not markup.has_codes(run.rest):
            plain.setdefault(run.claim.pair, []).append(run)
        else:
            step(run, partial(_submit_one, current))
    for pair, group in plain.items():
        try:
            submitted = engine.submit_plain(pair, [_request(current, run) for run in group])
        except Exception:  # each alone: a failure stays its chunk's
            session.rollback()  # a lookup's failure may have left its transaction open
            for run in group:
                step(run, partial(_submit_one, current))
            continue
        for run, batches in zip(group, submitted, strict=True):
            run.batches = batches


def _request(current: WorkerState, run: _Run) -> Request:
    return Request(run.rest, **_options(current, run))


def _submit_one(current: WorkerState, run: _Run) -> None:
    assert run.lookups is not None
    cache_under = run.lookups.under if run.lookups.cache else None
    run.batches = current.engine.translate_batches(
        run.claim.pair, run.rest, cache_under=cache_under, **_options(current, run)
    )


def _options(current: WorkerState, run: _Run) -> dict:
    """How the chunk's segments go into a batcher (Batcher.submit's keywords)."""
    claim, lookups = run.claim, run.lookups
    assert lookups is not None
    return {
        "priority": claim.priority,
        "job_id": claim.job_id,
        "tick_s": current.settings.heartbeat_s,
        "split_sentences": claim.split_sentences,
        "known": lookups.known if lookups.on else None,
    }


def _gather(current: WorkerState, session: Session, run: _Run) -> None:
    """Receive the chunk's batches, writing a larger chunk's parts as they come."""
    assert run.batches is not None and run.lookups is not None
    try:
        run.last, run.failed = _write_parts(
            current, session, run.claim, run.batches, len(run.rest), run.lookups, run.held
        )
    finally:
        run.batches.withdraw()  # a stop or an error: its waiting segments leave the batcher
    if run.last is None:
        run.outcome = _stopped(run.claim)
    else:  # the model's new cache entries go with the finish
        run.learned = run.lookups.learned(run.batches)


def _finish(
    current: WorkerState, celery: Celery, session: Session, worker: str, runs: list[_Run]
) -> None:
    """Finish the chunks in one committer request: each its chunk's end in one
    transaction and, with a job's last chunk, the job's."""
    ready = [run for run in runs if run.outcome is None]
    if not ready:
        return
    started = time.monotonic()
    finishes = [Finish(run.claim, tuple(run.last or ()), run.learned) for run in ready]
    for run, finished in zip(ready, current.committer.finish_many(finishes), strict=True):
        run.finished = finished
        metrics.observe_stage("write", time.monotonic() - started)
        assert run.batches is not None
        run.batches.release()  # written: a repeat now finds the cache


def _end(celery: Celery, run: _Run) -> None:
    claim, outcome = run.claim, run.finished
    if isinstance(outcome, BaseException):
        raise outcome  # mapped by _step as any step's failure
    if outcome is None or outcome == ChunkOutcome.LOST:
        run.outcome = _stopped(claim)
        return
    if outcome == ChunkOutcome.JOB_SUCCEEDED and claim.has_callback:
        send_callback(celery, claim.job_id)
    log.info(
        "chunk done logid=%s chunk=%d segments=%d failed=%d memory=%d reused_pieces=%d "
        "seconds=%.2f job=%s",
        claim.job_id,
        claim.chunk_idx,
        len(run.pending),
        run.failed,
        run.recalled,
        (run.lookups.hits if run.lookups else 0) + run.reused,
        time.monotonic() - run.started,
        "succeeded" if outcome == ChunkOutcome.JOB_SUCCEEDED else "running",
    )
    run.outcome = outcome


T = TypeVar("T")


def _write(
    session: Session,
    batches: Batches,
    lookups: Lookups,
    write: Callable[[Learned | None], T],
) -> T:
    """Run one write of the chunk's translations, given the model's new cache entries since
    the last (retried while the database is unreachable); then the batcher lets go of what
    it held for them."""
    write_started = time.monotonic()
    learned = lookups.learned(batches)
    written = with_retry(session, lambda: write(learned))
    metrics.observe_stage("write", time.monotonic() - write_started)
    batches.release()  # written: a repeat now finds the cache
    return written


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
    lookups: Lookups,
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


def _fail(current: WorkerState, celery: Celery, session: Session, claim: Claim, error: str) -> str:
    """Requeue a chunk whose translation raised (failed, with its job, once it has had its
    attempts)."""
    outcome = with_retry(
        session,
        lambda: fail_chunk(
            session, claim, error, retry=True, max_attempts=current.settings.max_attempts
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
