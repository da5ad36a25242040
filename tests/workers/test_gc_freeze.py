"""A worker freezes its start-up objects out of the garbage collector before it loads a
model (stapel.gc_freeze): the models it loads and evicts stay collectable."""

from __future__ import annotations

import re

from tests.factories import wait_for
from tests.workers_proc import WorkerProcess

FROZEN = re.compile(r"start-up objects frozen out of the garbage collector: (\d+) \(worker\)")
LOADED = re.compile(r"model loaded pair=en-de")


def test_a_worker_freezes_its_start_up_before_its_first_model(app, settings_overrides, tmp_path):
    env = {
        "DATABASE_URL": settings_overrides["database_url"],
        "REDIS_URL": settings_overrides["redis_url"],
        "STAPEL_MODEL_ROOT": str(settings_overrides["model_root"]),
        "STAPEL_PRELOAD": "en-de",
    }
    worker = WorkerProcess(env, tmp_path).start(app.extensions["stapel"].celery)
    try:
        wait_for(
            lambda: LOADED.search(worker.log_path.read_text(errors="replace")),
            timeout=60,
            what="the preloaded model",
        )
        log = worker.log_path.read_text(errors="replace")
    finally:
        worker.stop()
    frozen = FROZEN.search(log)
    assert frozen, "the worker froze nothing"
    assert int(frozen.group(1)) > 50_000
    assert frozen.start() < LOADED.search(log).start(), "a model was loaded before the freeze"
