"""Fixtures of the format tests: the demo models' engine, shared by a module's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.engine import Engine

MODELS = Path(__file__).resolve().parents[2] / "models"


@pytest.fixture(scope="module")
def engine():
    """An engine on the demo models (models/), its batchers closed after the module."""
    eng = Engine(MODELS, threads=1, max_loaded=1)
    yield eng
    for pair in eng.loaded_pairs():
        eng.model(pair).batcher.close()
