"""Pivoting: a pair no model serves, translated through English in two steps."""

from __future__ import annotations

import pytest

from stapel.pivot import served
from training.random_model import build as build_random_model
from workers.engine import Engine

TEXTS = ["word one end", "another short line", "", "a third one"]


@pytest.fixture(scope="module")
def root(tmp_path_factory, model_root):
    """de-en and en-fr: no de-fr model."""
    root = tmp_path_factory.mktemp("pivot-root")
    (root / "de-en").symlink_to(model_root / "de-en")
    build_random_model(root / "en-fr", seed=7)
    return root


def test_a_pair_through_the_pivot_is_listed_and_a_direct_one_wins(root):
    pairs = served(root, "en")
    assert pairs["de-fr"].family == "pivot" and pairs["de-fr"].via == "en"
    assert pairs["de-en"].family == "pair"
    assert "de-fr" not in served(root, "")  # pivoting off


def test_the_pivot_pair_is_both_steps_in_a_row(root):
    engine = Engine(root, max_decoding_length=16, pivot="en", max_loaded=2)
    english = engine.translate("de-en", TEXTS)
    assert engine.translate("de-fr", TEXTS) == engine.translate("en-fr", english)
    assert sorted(engine.loaded_pairs()) == ["de-en", "en-fr"]
    fps = {engine.fingerprint(p) for p in ("de-fr", "de-en", "en-fr")}
    assert len(fps) == 3  # its cache entries are its own
