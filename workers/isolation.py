"""A batch that raises: find what fails alone, deliver the rest, tell each task its part.

`isolate` bisects the batch, translating halves until every piece that still fails is
alone; everything that translates on the way is delivered as usual. `hand_out` gives
each piece that failed alone a SegmentError (its text from a batch that held only that
piece, so it names nothing of anyone else's) and logs the failed batch in one line with
the job ids it held. When every piece of a batch fails alone, the input is not to
blame: the tasks see the engine's error raised, and their chunks are retried.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from workers.submission import Item, SegmentError, Submission

log = logging.getLogger("workers.batcher")

Failures = list[tuple[Item, Exception]]


def isolate(
    batch: list[Item],
    translate: Callable[[list[Item]], list[str]],
    deliver: Callable[[list[Item], list[str]], None],
) -> Failures:
    """Bisect a failed batch: deliver every part that translates, return what fails alone."""
    failures: Failures = []
    for half in (batch[: len(batch) // 2], batch[len(batch) // 2 :]):
        try:
            outputs = translate(half)
        except Exception as exc:  # any engine error: split further
            alone = len(half) == 1
            failures.extend([(half[0], exc)] if alone else isolate(half, translate, deliver))
        else:
            deliver(half, outputs)
    return failures


def hand_out(
    name: str,
    batch: list[Item],
    failures: Failures,
    exc: Exception,
    riders: Sequence[tuple[Item, Exception]] = (),
) -> None:
    """Hand each failure to its request, and log the failed batch in one line.

    riders: identical pieces of other requests that rode on the failed ones (dedup in
    flight); they fail the same way.
    """
    engine_fault = len(batch) > 1 and len(failures) == len(batch)
    riders = list(riders)
    log.warning(
        "batch failed model=%s segments=%d failed_alone=%d logids=%s failed_logids=%s error=%s%s",
        name,
        len(batch),
        len(failures),
        logids(batch),
        logids([item for item, _ in failures]),
        f"{type(exc).__name__}: {exc}"[:300],
        " (every segment fails alone: the engine is at fault)" if engine_fault else "",
    )
    if engine_fault:  # not the input: the tasks requeue their chunks
        every = [*batch, *(item for item, _ in riders)]
        for request in {id(i.request): i.request for i in every}.values():
            request.fail(exc)
        return
    by_request: dict[int, tuple[Submission, list]] = {}
    for item, error in [*failures, *riders]:
        entry = by_request.setdefault(id(item.request), (item.request, []))
        entry[1].append((item, SegmentError.from_exception(error)))
    for request, pieces in by_request.values():
        request.receive(pieces)


def logids(items: list[Item]) -> str:
    """The job ids of items, sorted, comma-separated (for one log line)."""
    return ",".join(sorted({str(item.request.job_id) for item in items}))
