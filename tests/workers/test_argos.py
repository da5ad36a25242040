"""Argos Translate packages served as Argos installs them, with Argos's own output."""

from __future__ import annotations

import json
import shutil
import zipfile

import pytest

from stapel import argos
from stapel.model_dirs import language_names, problems, scan
from tests.families import argos_reference, build_argos
from workers.engine import Engine

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True, scope="module")
def _reference_libraries():
    """Skip where the train extra is missing; imported here, not at collection, so
    the unit tier never loads them."""
    pytest.importorskip("argostranslate")
    pytest.importorskip("spacy")


TEXTS = ["Bavo sena ritu kalo.", "Mipo tesa vunar."]
ARGOS = {"beam_size": 4, "length_penalty": 0.2, "replace_unknowns": True}
"""What workers.runtime.argos_options gives with STAPEL_ARGOS_BEAM_SIZE=4 and
STAPEL_ARGOS_LENGTH_PENALTY=0.2 (Argos's own decoding)."""


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    """An Argos packages directory with one installed package, de -> en."""
    root = tmp_path_factory.mktemp("argos-packages")
    build_argos(root / "translate-de_en-1_0", "de", "en", seed=3)
    return root


@pytest.mark.process  # argostranslate runs in a Python child (its settings come from env)
def test_an_installed_package_gives_argos_own_output(packages, tmp_path):
    expected = argos_reference(packages, tmp_path, TEXTS, "de", "en")
    engine = Engine(packages, compute_type="float32", threads=1, family_options={"argos": ARGOS})
    assert engine.translate("de-en", TEXTS) == expected


def test_metadata_codes_and_names_are_kept(packages, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(packages / "translate-de_en-1_0", root / "translate-en_zt-1_0")
    meta = json.loads((root / "translate-en_zt-1_0" / "metadata.json").read_text())
    meta.update(from_code="en", to_code="zt", from_name="English", to_name="Chinese (trad.)")
    (root / "translate-en_zt-1_0" / "metadata.json").write_text(json.dumps(meta))
    found = scan(root)
    assert list(found) == ["en-zh_Hant"] and found["en-zh_Hant"].family == "argos"
    assert language_names(found)["zh_Hant"] == "Chinese (trad.)"


def test_an_argosmodel_archive_in_the_root_is_unpacked_and_served(packages, tmp_path, monkeypatch):
    monkeypatch.setattr(argos, "UNPACK_DIR", tmp_path / "unpacked")
    root = tmp_path / "root"
    root.mkdir()
    with zipfile.ZipFile(root / "translate-de_en-1_0.argosmodel", "w") as zipped:
        for path in (packages / "translate-de_en-1_0").rglob("*"):
            zipped.write(path, path.relative_to(packages))
    found = scan(root)
    assert list(found) == ["de-en"]
    assert found["de-en"].path.parent.parent == tmp_path / "unpacked"
    engine = Engine(root, compute_type="float32", threads=1, family_options={"argos": ARGOS})
    reference = Engine(packages, compute_type="float32", threads=1, family_options={"argos": ARGOS})
    assert engine.translate("de-en", TEXTS[:1]) == reference.translate("de-en", TEXTS[:1])


def test_a_package_without_its_tokenizer_is_named_in_problems(packages, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(packages / "translate-de_en-1_0", root / "broken-pkg")
    (root / "broken-pkg" / "sentencepiece.model").unlink()
    assert "no sentencepiece.model" in problems(root)["broken-pkg"]
    assert scan(root) == {}


def test_a_target_prefix_is_given_and_cut(packages, tmp_path):
    import ctranslate2
    import sentencepiece as spm

    root = tmp_path / "root"
    package = shutil.copytree(packages / "translate-de_en-1_0", root / "translate-de_en-1_0")
    sp = spm.SentencePieceProcessor(model_file=str(package / "sentencepiece.model"))
    prefix = sp.id_to_piece(10)
    meta = json.loads((package / "metadata.json").read_text())
    (package / "metadata.json").write_text(json.dumps({**meta, "target_prefix": prefix}))
    engine = Engine(root, compute_type="float32", threads=1, max_decoding_length=16)
    translator = ctranslate2.Translator(str(package / "model"), compute_type="float32")
    raw = translator.translate_batch(
        sp.encode(TEXTS, out_type=str),
        target_prefix=[[prefix]] * len(TEXTS),
        max_decoding_length=17,  # 16 tokens after the prefix
        min_decoding_length=2,
        beam_size=1,
    )
    expected = [sp.decode(r.hypotheses[0][1:]).replace("\u2581", " ") for r in raw]
    assert engine.translate("de-en", TEXTS) == [t[1:] if t.startswith(" ") else t for t in expected]
