"""A pivot pair's two steps: the first model's translations are the second's sources.

Each segment goes through the first step's batcher; as its translations arrive they are
submitted to the second step's batcher at once, so both steps' batches run side by side
and share batches with other work of their models. What the task iterates is the second
step's output (a segment that failed in the first step fails as it did there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from workers.submission import Result, SegmentError

Leg = Callable[[list[tuple[int, str]]], object]
"""Submits (index, text) items to one step and returns its submission."""


class PivotSubmission:
    """Iterates like a workers.submission.Submission over the two steps' results."""

    def __init__(self, first, second: Leg, tick_s: float | None) -> None:
        self.first = first
        self.second = second
        self.tick_s = tick_s
        self.origins: dict[int, str] = {}
        """Index -> "mt" for each segment translated (no step reads or fills the cache)."""
        self._legs: list = []
        self._current = first

    @property
    def batcher(self):
        """The batcher of the step now awaited (its progress keeps the task's heartbeat)."""
        return self._current.batcher

    def take_learned(self) -> dict[str, str]:
        """Nothing per piece: a step's pieces would be keyed under the pivot pair."""
        return {}

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
                for i, result in part:
                    if isinstance(result, str):
                        self.origins[i] = "mt"
                yield part
