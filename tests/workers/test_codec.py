"""How a pair's pieces are decoded: never a literal ▁, the family's prefix and specials gone."""

from __future__ import annotations

from pathlib import Path

import pytest
import sentencepiece as spm

from workers.families import Codec

MODELS = Path(__file__).resolve().parents[2] / "models"


@pytest.fixture(scope="module")
def sp():
    return spm.SentencePieceProcessor(model_file=str(MODELS / "en-de" / "target.spm"))


@pytest.mark.parametrize(
    ("hypothesis", "text"),
    [
        (["▁Haus", "▁ist"], "Haus ist"),
        (["▁Haus", "▁Zzqxw", "▁ist"], "Haus Zzqxw ist"),  # a piece target.spm lacks
        (["▁Zzqxw"], "Zzqxw"),
    ],
)
def test_a_piece_the_target_model_lacks_becomes_a_space(sp, hypothesis, text):
    assert Codec(sp, sp).decode([hypothesis]) == [text]


def test_the_target_prefix_and_special_tokens_are_cut(sp):
    codec = Codec(sp, sp, prefix=("fra_Latn",), specials=frozenset({"fra_Latn", "<unk>"}))
    assert codec.decode([["fra_Latn", "▁Haus", "<unk>", "▁ist"]]) == ["Haus ist"]
    assert codec.keyed(["▁a"]) != Codec(sp, sp, prefix=("deu_Latn",)).keyed(["▁a"])


def test_argos_decoding_makes_underscores_spaces_as_argos_does(sp):
    assert Codec(sp, sp, argos=True).decode([["▁Haus", "▁a_b"]]) == ["Haus a b"]
