"""The build script runs end to end at a tiny scale and writes a loadable model directory."""

from __future__ import annotations

import json
from pathlib import Path

import ctranslate2
import pytest
import sentencepiece as spm

from training import build


@pytest.mark.slow
def test_tiny_build_end_to_end(tmp_path: Path) -> None:
    # skipped, not failed, where only requirements-test.txt is installed; importing torch
    # here, not at collection, keeps it out of the runs that deselect this test
    pytest.importorskip("torch", reason="training needs torch (requirements-train.txt)")
    pytest.importorskip("sacrebleu", reason="evaluation needs sacrebleu (requirements-train.txt)")
    out, work = tmp_path / "en-de", tmp_path / "work"
    build.main(["--pair", "en-de", "--tiny", "--out", str(out), "--work", str(work)])
    for name in ("model.bin", "config.json", "shared_vocabulary.json", "source.spm", "target.spm"):
        assert (out / name).stat().st_size > 0, name
    config = json.loads((out / "config.json").read_text())
    assert config["decoder_start_token"] == "<s>"
    sp = spm.SentencePieceProcessor(model_file=str(out / "source.spm"))
    vocab = json.loads((out / "shared_vocabulary.json").read_text())
    assert vocab == [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    translator = ctranslate2.Translator(str(out), device="cpu")
    result = translator.translate_batch(
        [sp.encode("The man reads the book.", out_type=str)], max_decoding_length=20
    )
    assert isinstance(result[0].hypotheses[0], list)
    report = json.loads((work / "en-de" / "report.json").read_text())
    float32 = [c for c in report["check"] if c["compute_type"] == "float32"]
    assert float32 and all(c["max_abs_logprob_diff"] < 1e-3 for c in float32)
    assert report["evaluation"]["sentences"] == build.TINY.n_test
    assert report["train"]["steps"] == build.TINY.steps
