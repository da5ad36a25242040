"""The Argos package bench.peer builds for LibreTranslate (no LibreTranslate needed)."""

from __future__ import annotations

import pytest

from bench.peer import LAUNCHER, package_members, package_metadata, package_name


@pytest.mark.parametrize(
    ("from_code", "to_code", "name", "from_name", "to_name"),
    [
        ("en", "de", "translate-en_de-1_0", "English", "German"),
        ("de", "en", "translate-de_en-1_0", "German", "English"),
    ],
)
def test_metadata_names_the_pair(from_code, to_code, name, from_name, to_name):
    metadata = package_metadata(from_code, to_code)
    assert package_name(from_code, to_code) == name
    assert metadata["type"] == "translate"
    assert (metadata["from_code"], metadata["to_code"]) == (from_code, to_code)
    assert (metadata["from_name"], metadata["to_name"]) == (from_name, to_name)


def test_members_lay_the_model_out_as_argos_reads_it(tmp_path):
    model, spacy = tmp_path / "model", tmp_path / "spacy"
    for name in ("config.json", "model.bin", "shared_vocabulary.json", "source.spm", "target.spm"):
        (model / name).parent.mkdir(exist_ok=True)
        (model / name).write_text(name)
    for name in ("config.cfg", "meta.json", "vocab/strings.json"):
        (spacy / name).parent.mkdir(parents=True, exist_ok=True)
        (spacy / name).write_text(name)

    members = dict(package_members(model, spacy, "pkg"))

    assert sorted(members) == [
        "pkg/model/config.json",
        "pkg/model/model.bin",
        "pkg/model/shared_vocabulary.json",
        "pkg/sentencepiece.model",
        "pkg/spacy/config.cfg",
        "pkg/spacy/meta.json",
        "pkg/spacy/vocab/strings.json",
    ]
    assert members["pkg/sentencepiece.model"] == model / "source.spm"


def test_launcher_is_valid_python():
    compile(LAUNCHER, "launch.py", "exec")
