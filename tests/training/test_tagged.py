"""The tagged held-out set, its scoring, and the alignment settings of the demo models."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stapel.formats import inline
from training import modelbin
from training.corpus import build_corpus, is_held_out
from training.tagged import evaluate, score, tagged_pairs

MODELS = Path(__file__).resolve().parents[2] / "models"


def test_tagged_pairs_are_held_out_grammar_sentences_with_tags():
    pairs = tagged_pairs(100)
    assert all(inline.has_codes(en) and inline.has_codes(de) for en, de in pairs)
    assert all(is_held_out(inline.strip(en)) for en, _ in pairs)
    # the markers change nothing else: the plain pairs are grammar sentences
    plain = {inline.strip(en): inline.strip(de) for en, de in pairs}
    reference = dict(build_corpus(0, 200, seed=0).test)  # the same draws, untagged
    common = plain.keys() & reference.keys()
    assert len(common) > 90
    assert all(plain[en] == reference[en] for en in common)
    # each tag is in both languages
    for en, de in pairs:
        assert sorted(c.id for c in inline.split(en)[1]) == sorted(
            c.id for c in inline.split(de)[1]
        )


def test_score_counts_exact_word_positions():
    from tests.formats.samples import tags

    ref = tags("Der <1>alte Mann</1> sieht <2/> den Hund.")
    right = score([(ref, ref)])
    wrong = score([(tags("Der alte <1>Mann</1> sieht den <2/> Hund."), ref)])
    assert (right.tags, right.right) == (2, 2)
    assert (wrong.tags, wrong.right) == (2, 0)


@pytest.mark.parametrize(("pair", "goal"), [("en-de", 0.97), ("de-en", 0.95)])
def test_committed_models_place_tags_on_the_right_words(pair, goal):
    path = MODELS / pair / "model.bin"
    assert modelbin.read_scalar(path, "decoder/alignment_layer") == 1
    assert modelbin.read_scalar(path, "decoder/alignment_heads") == 4
    assert evaluate(pair, 300).as_json()["share"] >= goal


def test_alignment_settings_out_of_range_are_refused(tmp_path):
    shutil.copytree(MODELS / "en-de", tmp_path / "m")
    with pytest.raises(ValueError, match="no layer 3"):
        modelbin.set_alignment(tmp_path / "m", 3, 1)
    modelbin.set_alignment(tmp_path / "m", 0, 2)
    assert modelbin.read_scalar(tmp_path / "m" / "model.bin", "decoder/alignment_layer") == 0
