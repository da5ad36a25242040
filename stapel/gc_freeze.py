"""A serving process's start-up objects kept out of the cyclic garbage collector's passes.

A process holds 100,000 objects or more once it has started (imports, SQLAlchemy's,
Flask's and Celery's tables), nearly all alive until it ends, and every full (generation
2) collection walked them all with the GIL held: 43-112 ms in a web process, 70-172 ms
in a worker, every thread of the process stalled (docs/design/gc-freeze.md). Frozen
(`gc.freeze`), they are skipped: a full collection then took 1-2 ms in a web process and
about 11 ms in a worker (what its models and batches keep).

Only for a process that serves until it ends, and only what it keeps: an object frozen
and later dropped inside a reference cycle is never freed. A worker freezes before it
loads a model, so the models it loads and evicts (with their batchers and threads, which
do form cycles) stay collectable. The test process, which makes many apps, never freezes
(the web and worker processes it starts do).
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def freeze_start_up(process: str) -> int:
    """Collect once (start-up's garbage goes), then freeze every object alive; return how
    many are frozen."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("start-up objects frozen out of the garbage collector: %d (%s)", frozen, process)
    return frozen
