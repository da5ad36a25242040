"""A confidence score on every machine-translated segment, and the review rule on it.

A segment's score is the model's own: CTranslate2 returns each hypothesis's
length-normalised log-probability (`return_scores`), and its exponential is the mean
probability per token, in [0, 1]. A memory's exact match scores 1 (a human's
translation); an MT cache hit carries the score stored with it. A segment translated as
several pieces scores its weakest piece's (`combine`), a pivoted one the product of its
two steps (`chain`). A job's `min_score` sends a machine translation that scores under
it to review: its target is left empty or is the source (`BelowMinScore`), and the
segment is marked (`segments.review`). docs/design/scores.md has the interface.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, case, func, select, update
from sqlalchemy.orm import Session

from stapel.exceptions import ValidationError
from stapel.states import Origin
from stapel.tables import Chunk, Tenant

BUCKETS = (("under_30", 0.3), ("under_50", 0.5), ("under_70", 0.7))
"""(chunks column, threshold): each chunk counts its machine translations (`mt` and
`cache`) scoring under each threshold with its other counts, so a job's distribution
is a sum over its chunks, never a read of its segments."""

THRESHOLDS = tuple(t for _, t in BUCKETS)

MEMORY_SCORE = 1.0
"""A memory's exact match: a human's translation, never sent to review."""


class BelowMinScore(StrEnum):
    """What a segment scoring under the job's min_score gets as its target."""

    EMPTY = "empty"
    """An empty target: nothing a reader could mistake for a translation."""
    SOURCE = "source"
    """The source text, as a document keeps a segment not translated yet."""


DEFAULT_BELOW = BelowMinScore.EMPTY


def from_log_prob(value: float) -> float:
    """Return the score of a length-normalised log-probability: exp(value) in [0, 1]."""
    if math.isnan(value):
        return 0.0
    return min(max(math.exp(min(value, 0.0)), 0.0), 1.0)


def combine(scores: Iterable[float | None]) -> float | None:
    """Return a segment's score from its pieces' (None when a piece has none).

    The minimum, not a length-weighted mean: one garbled sentence makes the segment need
    a reviewer however good the others are, and a mean would hide it.
    """
    found = list(scores)
    if not found or any(s is None for s in found):
        return None
    return min(s for s in found if s is not None)


def chain(first: float | None, second: float | None) -> float | None:
    """Return a pivoted segment's score: the product of its two steps' (None if either is)."""
    if first is None or second is None:
        return None
    return first * second


class Scored(str):
    """A model's translation with its score: a str, so every path that carries the text
    (the batcher's riders, its delivered map, the cache's entries) carries the score."""

    score: float | None

    def __new__(cls, text: str, score: float | None) -> Scored:
        made = super().__new__(cls, text)
        made.score = score
        return made


def score_of(value: object) -> float | None:
    """Return the score a translation carries (None for a plain text)."""
    return getattr(value, "score", None)


def needs_review(score: float | None, min_score: float | None) -> bool:
    """Whether a target scoring `score` goes to review under `min_score`.

    A target with no score (stored before scores, or from a model that returns none) is
    kept: nothing says it is weak.
    """
    return min_score is not None and score is not None and score < min_score


def check_min_score(value: object, where: str = "min_score") -> float | None:
    """Return a valid min_score (a number in [0, 1], or None), or raise ValidationError."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValidationError(f"{where} must be a number from 0 to 1", code="invalid_min_score")
    return float(value)


def check_below(value: object, where: str = "below_min_score") -> BelowMinScore:
    """Return a valid below_min_score (`empty` when None), or raise ValidationError."""
    if value is None:
        return DEFAULT_BELOW
    for choice in BelowMinScore:
        if value == choice.value:
            return choice
    choices = ", ".join(b.value for b in BelowMinScore)
    raise ValidationError(f"{where} must be one of {choices}", code="invalid_below_min_score")


@dataclass(frozen=True)
class Distribution:
    """A job's machine translations by score: how many scored under each threshold, and
    how many went to review."""

    below: dict[str, int]
    review: int

    def as_json(self) -> dict:
        return {"below": self.below, "review": self.review}


MACHINE = (Origin.MT.value, Origin.CACHE.value)
"""The origins whose scores the distribution counts (a memory's is always 1)."""


def bucket_counts(segment_score: Any, origin: Any) -> dict[str, Any]:
    """Per BUCKETS column, the SQL that counts one scored machine translation (1 or 0)."""
    machine = origin.in_(MACHINE)
    return {name: case((machine & (segment_score < t), 1), else_=0) for name, t in BUCKETS}


def distribution(db: Session | Connection, job_id: str) -> Distribution:
    """Sum the job's chunks' counts under each threshold and for review (one read)."""
    columns = [func.coalesce(func.sum(getattr(Chunk, name)), 0) for name, _ in BUCKETS]
    row = db.execute(
        select(*columns, func.coalesce(func.sum(Chunk.review), 0)).where(Chunk.job_id == job_id)
    ).one()
    below = {str(t): int(n) for t, n in zip(THRESHOLDS, row[:-1], strict=True)}
    return Distribution(below, int(row[-1]))


TENANT_CACHE_S = 5.0
"""How long a process trusts a tenant's default min_score it read (a change made in
another process is seen within this long; the process that makes it sees it at once)."""

_tenant_defaults: dict[str, tuple[float | None, float]] = {}
_tenant_lock = threading.Lock()


def tenant_min_score(session: Session, tenant_id: str) -> float | None:
    """Return the tenant's default min_score (None: it has none), read at most every
    TENANT_CACHE_S per process so a submission pays no query for it."""
    known = _tenant_defaults.get(tenant_id)
    now = time.monotonic()
    if known is not None and now - known[1] < TENANT_CACHE_S:
        return known[0]
    value = session.scalar(select(Tenant.min_score).where(Tenant.id == tenant_id))
    with _tenant_lock:
        if len(_tenant_defaults) >= 10_000:
            _tenant_defaults.clear()
        _tenant_defaults[tenant_id] = (value, now)
    return value


def set_tenant_min_score(session: Session, name: str, value: float | None) -> bool:
    """Set (or with None clear) the named tenant's default min_score; False: no such tenant."""
    check_min_score(value)
    done = session.execute(
        update(Tenant).where(Tenant.name == name).values(min_score=value).returning(Tenant.id)
    ).scalar()
    session.commit()
    with _tenant_lock:
        _tenant_defaults.clear()
    return done is not None
