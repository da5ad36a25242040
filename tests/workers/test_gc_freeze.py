"""A worker freezes its start-up objects out of the garbage collector before it loads a
model (stapel.gc_freeze): the models it loads and evicts stay collectable."""

from __future__ import annotations

import re

import pytest

from tests.factories import wait_for
from tests.workers_proc import stack_worker

FROZEN = re.compile(r"start-up objects frozen out of the garbage collector: (\d+) \(worker\)")
LOADED = re.compile(r"model loaded pair=en-de")


@pytest.fixture
def worker(app, settings_overrides, tmp_path):
    yield from stack_worker(app, settings_overrides, tmp_path, STAPEL_PRELOAD="en-de")


@pytest.mark.process
def test_a_worker_freezes_its_start_up_before_its_first_model(worker):
    wait_for(
        lambda: LOADED.search(worker.log_path.read_text(errors="replace")),
        timeout=60,
        what="the preloaded model",
    )
    log = worker.log_path.read_text(errors="replace")
    frozen = FROZEN.search(log)
    assert frozen, "the worker froze nothing"
    assert int(frozen.group(1)) > 50_000
    assert frozen.start() < LOADED.search(log).start(), "a model was loaded before the freeze"
