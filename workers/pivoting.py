"""A pivot pair's two steps: the first model's translations are the second's sources.

Each segment goes through the first step's batcher; as its translations arrive they are
submitted to the second step's batcher at once, so both steps' batches run side by side
and share batches with other work of their models. What the task iterates is the second
step's output (a segment that failed in the first step fails as it did there). Each
step reads and fills the MT cache under its own model's fingerprint, so a pivot job and
a direct job of one of its steps share entries (take_step_learned).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from stapel.model_dirs import ModelDir
from stapel.pivot import legs
from stapel.scores import chain
from workers.batcher import Known
from workers.submission import Result, SegmentError

ORDER = ("mt", "cache", "memory")
"""A segment's origin is the first of these that one of its steps had."""

Leg = Callable[[list[tuple[int, str]]], object]
"""Submits (index, text) items to one step and returns its submission."""


class PivotSubmission:
    """Iterates like a workers.submission.Submission over the two steps' results."""

    def __init__(self, first, second: Leg, tick_s: float | None, fps: tuple[str, str]) -> None:
        self.first = first
        self.second = second
        self.tick_s = tick_s
        self.fps = fps
        """The two steps' model fingerprints (their cache entries' keys)."""
        self.origins: dict[int, str] = {}
        """Index -> "cache" or "mt" of each segment translated: mt if a step's model
        translated a piece of it, cache if the cache answered both steps."""
        self.scores: dict[int, float | None] = {}
        """Index -> the product of its two steps' scores (stapel.scores.chain)."""
        self._legs: list = []
        self._current = first

    @property
    def batcher(self):
        """The batcher of the step now awaited (its progress keeps the task's heartbeat)."""
        return self._current.batcher

    def take_learned(self) -> dict[str, str]:
        """Nothing under the pivot pair's fingerprint: each step keeps its own."""
        return {}

    def take_step_learned(self) -> dict[str, dict[str, str]]:
        """Return and forget each step's new piece translations, by its fingerprint."""
        second: dict[str, str] = {}
        for leg in self._legs:
            second.update(leg.take_learned())
        found = {self.fps[0]: self.first.take_learned(), self.fps[1]: second}
        return {fp: entries for fp, entries in found.items() if entries}

    def withdraw(self) -> None:
        for leg in (self.first, *self._legs):
            leg.withdraw()

    def release(self) -> None:
        for leg in (self.first, *self._legs):
            leg.release()

    def __iter__(self) -> Iterator[list[tuple[int, Result]]]:
        for part in self.first:
            failed: list[tuple[int, Result]] = [
                (i, r) for i, r in part if isinstance(r, SegmentError)
            ]
            texts = [(i, r) for i, r in part if isinstance(r, str)]
            if texts:
                self._legs.append(self.second(texts))
            yield failed  # an empty part is a tick: the task heartbeats on it
        for leg in self._legs:
            self._current = leg
            for part in leg:
                for i, _result in part:
                    steps = {self.first.origins.get(i), leg.origins.get(i)} - {None}
                    if steps:
                        self.origins[i] = next(o for o in ORDER if o in steps)
                        self.scores[i] = chain(self.first.scores.get(i), leg.scores.get(i))
                yield part


def submit(
    engine,
    found: ModelDir,
    items: list[tuple[int, str]],
    options: dict,
    split_sentences: bool,
    cache_under: Callable[[str], Known] | None,
) -> PivotSubmission:
    """Submit items to a pivot pair's first step; each part that comes back goes on to
    the second (workers.engine.Engine.translate_batches does both)."""
    steps = legs(found)
    fps = (engine.fingerprint(steps[0]), engine.fingerprint(steps[1]))

    def step(n: int) -> Leg:
        known = cache_under(fps[n]) if cache_under is not None else None
        return lambda part: engine.translate_batches(
            steps[n], part, split_sentences=split_sentences, known=known, **options
        )

    return PivotSubmission(step(0)(items), step(1), options["tick_s"], fps)
