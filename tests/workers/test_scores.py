"""Each translated segment's score, as the engine hands it to the task (tiny real models)."""

from __future__ import annotations

import math

import ctranslate2
import pytest

from stapel.formats.inline import marker
from tests.workers.test_pivot import TEXTS
from tests.workers.test_pivot import root as root  # the pivot's model root
from workers.engine import Engine


def translated(engine: Engine, pair: str, texts: list[str], **options) -> tuple[list, dict]:
    """(targets, index -> score) of texts through translate_batches."""
    out: list = [None] * len(texts)
    batches = engine.translate_batches(pair, enumerate(texts), **options)
    try:
        for part in batches:
            for index, text in part:
                out[index] = text
    finally:
        batches.release()
    return out, batches.scores


@pytest.fixture(scope="module")
def engine(root):
    return Engine(root, max_decoding_length=16, pivot="en", max_loaded=2, threads=1)


def test_the_score_is_the_exponential_of_the_models_normalised_log_probability(engine, root):
    _, scores = translated(engine, "de-en", ["word one end"])
    model = engine.model("de-en")
    tokens = model.source.encode(["word one end"], out_type=str)[0] + ["</s>"]
    direct = ctranslate2.Translator(str(root / "de-en"), device="cpu", compute_type="int8")
    expected = direct.translate_batch([tokens], **model.batcher.options)
    assert scores[0] == pytest.approx(math.exp(expected[0].scores[0]), rel=1e-4)
    assert 0 < scores[0] < 1


def test_a_blank_segment_has_no_score_and_a_split_one_scores_its_weakest_sentence(engine):
    texts = ["Word one end.", "Another short line.", " ", "Word one end.  Another short line."]
    _, scores = translated(engine, "de-en", texts)
    assert 2 not in scores
    assert scores[3] == min(scores[0], scores[1])  # its sentences rode on segments 0 and 1


def test_a_pivoted_segment_scores_the_product_of_its_two_steps(engine):
    english, first = translated(engine, "de-en", TEXTS)
    _, second = translated(engine, "en-fr", english)
    _, pivoted = translated(engine, "de-fr", TEXTS)
    assert set(pivoted) == {0, 1, 3}  # the blank segment has none
    for i in pivoted:
        assert pivoted[i] == pytest.approx(first[i] * second[i], rel=1e-4)


def test_a_segment_with_inline_codes_scores_its_plain_text(engine):
    tagged = f"word {marker('open', 1)}one{marker('close', 1)} end"
    out, scores = translated(engine, "de-en", [tagged])
    assert marker("open", 1) in out[0] and 0 < scores[0] <= 1
