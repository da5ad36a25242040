"""The score rules (stapel.scores): pure functions, and the counts a chunk keeps of them."""

from __future__ import annotations

import json
import math

import pytest
from sqlalchemy import select

from stapel import callbacks, chunk_groups, chunks, scores
from stapel.chunk_groups import Finish
from stapel.exceptions import ValidationError
from stapel.tables import Chunk, Job, Segment, utcnow
from tests.stapel.test_jobs import chunk_ids, make_job


@pytest.mark.parametrize(
    ("log_prob", "score"),
    [
        (0.0, 1.0),
        (math.log(0.5), 0.5),
        (-1e9, 0.0),
        (float("-inf"), 0.0),
        (float("nan"), 0.0),
        (0.3, 1.0),  # a positive value (a length penalty's rounding) is clamped
    ],
)
def test_from_log_prob(log_prob, score):
    assert scores.from_log_prob(log_prob) == pytest.approx(score)


@pytest.mark.parametrize(
    ("pieces", "combined"),
    [([0.9], 0.9), ([0.9, 0.2, 0.6], 0.2), ([1.0, 0.4], 0.4), ([0.9, None], None), ([], None)],
)
def test_a_segment_scores_its_weakest_piece(pieces, combined):
    assert scores.combine(pieces) == combined


@pytest.mark.parametrize(
    ("first", "second", "chained"),
    [(0.5, 0.5, 0.25), (1.0, 0.3, 0.3), (None, 0.3, None), (0.3, None, None)],
)
def test_a_pivot_multiplies_its_steps(first, second, chained):
    assert scores.chain(first, second) == chained


@pytest.mark.parametrize(
    ("score", "min_score", "review"),
    [
        (0.2, 0.5, True),
        (0.5, 0.5, False),  # under, not at
        (0.9, 0.5, False),
        (None, 0.5, False),  # no score: nothing says it is weak
        (0.0, None, False),  # no min_score: nothing is routed
        (scores.MEMORY_SCORE, 1.0, False),  # a memory's match never goes to review
    ],
)
def test_needs_review(score, min_score, review):
    assert scores.needs_review(score, min_score) is review


def test_a_scored_text_is_its_text_and_carries_its_score():
    text = scores.Scored("Hallo", 0.4)
    assert text == "Hallo" and {text: 1}["Hallo"] == 1
    assert scores.score_of(text) == 0.4 and scores.score_of("Hallo") is None
    assert type(str(text)) is str


@pytest.mark.parametrize("value", [0, 1, 0.5, None])
def test_a_valid_min_score_passes(value):
    assert scores.check_min_score(value) == (None if value is None else float(value))


@pytest.mark.parametrize("value", [-0.1, 1.01, True, "0.5", [0.5], float("nan"), float("inf")])
def test_an_invalid_min_score_is_refused(value):
    with pytest.raises(ValidationError) as raised:
        scores.check_min_score(value)
    assert raised.value.code == "invalid_min_score"


@pytest.mark.parametrize(
    ("value", "below"),
    [(None, scores.BelowMinScore.EMPTY), ("empty", "empty"), ("source", "source")],
)
def test_below_min_score(value, below):
    assert scores.check_below(value) == below


@pytest.mark.parametrize("value", ["", "Source", "drop", 1])
def test_an_invalid_below_min_score_is_refused(value):
    with pytest.raises(ValidationError) as raised:
        scores.check_below(value)
    assert raised.value.code == "invalid_below_min_score"


def claimed(session, job_id: str, n: int) -> list[chunks.Claim]:
    """Claim the job's first n chunks (each through claim_chunk)."""
    found = [chunks.claim_chunk(session, cid, "w") for cid in chunk_ids(session, job_id)[:n]]
    assert all(found)
    return found  # type: ignore[return-value]


@pytest.mark.parametrize("grouped", [False, True])
def test_a_chunk_counts_its_scores_and_reviews_alone_or_in_a_group(any_session, grouped):
    """finish_chunk and the group finish count alike; weak targets are routed as asked."""
    s = any_session
    _, job = make_job(s, n=4, chunk=2, min_score=0.5, below_min_score="source")
    first, second = claimed(s, job.id, 2)
    mt, cache, memory = "mt", "cache", "memory"
    finishes = [
        Finish(first, [(0, "a", mt, "fp", 0.2), (1, "b", memory, None, 1.0)]),
        Finish(second, [(2, "c", cache, "fp", 0.45), (3, "d", mt, "fp", 0.65)]),
    ]
    if grouped:
        outcomes = chunk_groups.finish_chunks(s, finishes)
    else:
        outcomes = [chunks.finish_chunk(s, f.claim, f.translations) for f in finishes]
    assert "succeeded" in outcomes  # the job ended with one of them
    rows = s.execute(
        select(Segment.target, Segment.score, Segment.review)
        .where(Segment.job_id == job.id)
        .order_by(Segment.idx)
    ).all()
    assert [tuple(r) for r in rows] == [
        ("seg 0-0", 0.2, True),  # its source, as the job asked
        ("b", 1.0, False),
        ("seg 0-2", 0.45, True),
        ("d", 0.65, False),
    ]
    counts = s.execute(
        select(Chunk.review, Chunk.under_30, Chunk.under_50, Chunk.under_70)
        .where(Chunk.job_id == job.id)
        .order_by(Chunk.idx)
    ).all()
    assert [tuple(c) for c in counts] == [(1, 1, 1, 1), (1, 0, 1, 2)]  # a memory's 1 in none
    assert s.scalar(select(Job.segments_review).where(Job.id == job.id)) == 2
    distribution = scores.distribution(s, job.id)
    assert distribution.as_json() == {"below": {"0.3": 1, "0.5": 2, "0.7": 3}, "review": 2}


def test_an_empty_target_is_written_for_review_by_default(any_session):
    s = any_session
    _, job = make_job(s, n=2, chunk=2, min_score=0.5)
    (claim,) = claimed(s, job.id, 1)
    assert chunks.record_batch(s, claim, [(0, "a", "mt", "fp", 0.1), (1, "b", "mt", "fp", 0.9)])
    rows = s.execute(
        select(Segment.target, Segment.review).where(Segment.job_id == job.id).order_by(Segment.idx)
    ).all()
    assert [tuple(r) for r in rows] == [("", True), ("b", False)]
    # written once: a second write (a stale worker) changes neither
    chunks.record_batch(s, claim, [(0, "late", "mt", "fp", 0.9)])
    assert s.scalar(select(Segment.target).where(Segment.job_id == job.id, Segment.idx == 0)) == ""
    assert s.scalar(select(Chunk.review).where(Chunk.id == claim.chunk_id)) == 1


def test_the_callback_says_how_many_segments_wait_for_review(any_session):
    _, job = make_job(any_session, n=2, chunk=2, min_score=0.5)
    job.segments_review = 2
    body = json.loads(callbacks.payload(job, utcnow(), 1))
    assert body["segments_review"] == 2
