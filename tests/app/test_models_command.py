"""`flask --app app models`: what the model root serves, and each folder it cannot, logged once."""

from __future__ import annotations

import logging

import pytest

from stapel import model_dirs


@pytest.fixture
def settings_overrides(settings_overrides, model_root, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "en-de").symlink_to(model_root / "en-de")
    (root / "fr-en").mkdir()  # a pair folder half copied
    (root / "opus-mt-de-fr").mkdir()  # a Hugging Face download, not converted
    (root / "opus-mt-de-fr" / "pytorch_model.bin").write_bytes(b"")
    (root / "nllb-half").mkdir()  # converted without --copy_files
    (root / "nllb-half" / "model.bin").write_bytes(
        (model_root / "en-de" / "model.bin").read_bytes()
    )
    return {**settings_overrides, "model_root": root}


def test_models_lists_served_and_not_served(runner):
    result = runner.invoke(args=["models"])
    assert result.exception is None, result.exception
    out = result.output
    assert "en-de  family=pair  pairs=1  languages=de, en" in out
    assert "NOT SERVED fr-en: missing model.bin, source.spm, target.spm" in out
    assert "NOT SERVED opus-mt-de-fr:" in out and "not a model folder" in out
    assert "NOT SERVED nllb-half:" in out and "no SentencePiece model" in out


def test_a_folder_not_served_is_logged_once(settings_overrides, caplog):
    root = settings_overrides["model_root"]
    with caplog.at_level(logging.WARNING, logger="stapel.model_dirs"):
        model_dirs._scans.pop(root, None)
        model_dirs.served_pairs(root)
        model_dirs._scans.pop(root, None)
        model_dirs.served_pairs(root)
    lines = [r.getMessage() for r in caplog.records if "model not served" in r.getMessage()]
    assert sorted(line.split()[3] for line in lines) == [
        "entry=fr-en",
        "entry=nllb-half",
        "entry=opus-mt-de-fr",
    ]
