"""Segments cut into pieces a model takes, joined back with the source's whitespace."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

from stapel import segmentation as seg
from stapel.model_bin import DEFAULT_INPUT_TOKENS, limits
from stapel.model_dirs import problems

MODELS = Path(__file__).resolve().parents[2] / "models"


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("One. Two.", ["One. ", "Two."]),
        ("  Lead.  Two!\n", ["  Lead.  ", "Two!\n"]),
        ("Dr. Smith is here. He waits.", ["Dr. Smith is here. ", "He waits."]),
        ("no end", ["no end"]),
    ],
)
def test_sentences_join_back_to_the_text(text, sentences):
    assert seg.sentences(text, "en") == sentences


def test_pieces_keep_the_whitespace_apart_and_join_restores_it():
    parts = seg.pieces("  One. \tTwo!\n\n", "en", split_sentences=True)
    assert [p.text for p in parts if p.text] == ["One.", "Two!"]  # whitespace-only: ""
    german = {"One.": "Eins.", "Two!": "Zwei!", "": ""}
    assert seg.join(parts, [german[p.text] for p in parts]) == "  Eins. \tZwei!\n\n"
    (whole,) = seg.pieces(" One. Two. ", "en", split_sentences=False)
    assert (whole.lead, whole.text, whole.trail) == (" ", "One. Two.", " ")


@pytest.mark.parametrize(
    ("text", "limit", "parts"),
    [
        ("aaa bbb ccc", 8, ["aaa bbb ", "ccc"]),  # at the last whitespace that fits
        ("aaa, bbb; ccc ddd", 9, ["aaa, ", "bbb; ccc ", "ddd"]),  # punctuation counts too
        ("a" * 25, 10, ["a" * 10, "a" * 10, "a" * 5]),  # no break in reach: a hard cut
        ("short", 10, ["short"]),
    ],
)
def test_cut_to_fit_ends_parts_at_breaks(text, limit, parts):
    assert seg.cut_to_fit(text, lambda t: len(t) <= limit) == parts


def test_a_cut_piece_keeps_the_outer_whitespace_once():
    piece = seg.Piece(" ", "word " * 9 + "end", "\n")
    bits = seg.cut(piece, lambda t: len(t) <= 12)
    assert all(len(b.text) <= 12 for b in bits)
    assert seg.join(bits, [b.text for b in bits]) == " " + "word " * 9 + "end\n"


def test_the_input_limit_comes_from_the_models_position_table(model_root):
    assert limits(MODELS / "en-de").input_tokens == 256  # the demo models
    assert limits(model_root / "en-de").input_tokens == 1024  # the tests' random ones


def test_a_model_without_a_table_states_its_limit_or_gets_the_default(tmp_path):
    model = tmp_path / "en-xx"
    model.mkdir()
    name = b"TransformerSpec\0"
    (model / "model.bin").write_bytes(
        struct.pack("I", 6) + struct.pack("H", len(name)) + name + struct.pack("III", 1, 0, 0)
    )
    assert limits(model).input_tokens == DEFAULT_INPUT_TOKENS
    (model / "config.json").write_text('{"max_input_tokens": 300}')
    assert limits(model).input_tokens == 300


def test_problems_names_incomplete_and_unreadable_model_dirs(tmp_path, model_root):
    shutil.copytree(model_root / "en-de", tmp_path / "en-de")
    shutil.copytree(model_root / "de-en", tmp_path / "de-en")
    (tmp_path / "de-en" / "model.bin").write_bytes(os.urandom(64))
    (tmp_path / "en-fr").mkdir()
    found = problems(tmp_path)
    assert set(found) == {"de-en", "en-fr"}
    assert "unreadable model.bin" in found["de-en"] and "missing model.bin" in found["en-fr"]


def _model_bin(path: Path, rows: int) -> None:
    """Write a model.bin holding only an encoder position table of `rows` rows."""
    name = b"TransformerSpec\0"
    var = b"encoder/position_encodings/encodings\0"
    data = bytes(rows * 4 * 4)
    path.write_bytes(
        struct.pack("I", 6)
        + struct.pack("H", len(name))
        + name
        + struct.pack("II", 1, 1)
        + struct.pack("H", len(var))
        + var
        + struct.pack("B", 2)
        + struct.pack("II", rows, 4)
        + struct.pack("B", 0)
        + struct.pack("I", len(data))
        + data
        + struct.pack("I", 0)
    )


@pytest.mark.parametrize(
    ("rows", "limit"),
    [(300, 300), (1024, 1024), (2048, DEFAULT_INPUT_TOKENS), (5000, DEFAULT_INPUT_TOKENS)],
)
def test_a_table_a_converter_made_up_never_raises_the_limit(tmp_path, rows, limit):
    _model_bin(tmp_path / "model.bin", rows)
    assert limits(tmp_path).input_tokens == limit
    assert limits(tmp_path, stated=200).input_tokens == 200  # a manifest only lowers it
