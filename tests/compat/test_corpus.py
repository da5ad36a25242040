"""Real files from other tools (tests/formats/corpus/README.md) through /v1 and DeepL's
document API on a live stack, with structural checks: the output is well-formed and
identical through both APIs, every unit is translated, every inline code comes back once
with its id and attributes, no marker character leaks, and a Word file opens."""

from __future__ import annotations

import io
import re
import zipfile
from collections import Counter
from pathlib import Path

import deepl
import docx as python_docx
import polib
import pytest
from lxml import etree

from stapel import formats
from tests.compat.test_deepl_documents import inline_markers, through_v1
from training.random_model import build as build_random_model

pytestmark = pytest.mark.e2e

CORPUS = Path(__file__).resolve().parents[1] / "formats" / "corpus"
PAIRS = {
    "okapi-simpleTest.sdlxliff": ("en", "es"),
    "okapi-xliff2-test01.xlf": ("en", "fr"),
    "okapi-RB-12-Test02.xlf": ("en", "fr"),
    "okapi-simpleTest.html": ("en", "de"),
    "okapi-UTF8WithBOM.html": ("en", "de"),
    "okapi-srttest.srt": ("en", "de"),
    "polib-merge.pot": ("en", "de"),
    "polib-weird-occurrences.po": ("en", "de"),
    "python-docx-test.docx": ("en", "de"),
}
CODES = {"x", "bx", "ex", "g", "bpt", "ept", "ph", "it", "pc", "sc", "ec"}
TAG = re.compile(rb"<[^>]*>")
TRANSLATED = re.compile(rb"""(\s(?:alt|title)\s*=\s*)("[^"]*"|'[^']*')""", re.I)


@pytest.fixture(scope="module")
def model_root(tmp_path_factory):
    """Random-weight models for every pair of the corpus."""
    root = tmp_path_factory.mktemp("corpus-models")
    for seed, (source, target) in enumerate(sorted(set(PAIRS.values()) | {("de", "en")})):
        build_random_model(root / f"{source}-{target}", seed=seed + 1)
    return root


@pytest.fixture(scope="module")
def translator(live, live_key):
    return deepl.Translator(live_key, server_url=f"{live}/deepl/")


def test_the_corpus_is_what_its_readme_lists():
    listed = (CORPUS / "README.md").read_text()
    assert sorted(p.name for p in CORPUS.iterdir() if p.name != "README.md") == sorted(PAIRS)
    assert all(name in listed for name in PAIRS)


@pytest.mark.parametrize("name", list(PAIRS))
def test_a_real_file_through_both_apis(live, live_key, translator, name, tmp_path):
    data = (CORPUS / name).read_bytes()
    source, target = PAIRS[name]
    v1 = through_v1(live, live_key, name, data, source, target)
    out = tmp_path / name
    target_lang = {"en": "EN-GB"}.get(target, target.upper())
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / name).write_bytes(data)
    translator.translate_document_from_filepath(
        tmp_path / "in" / name, out, source_lang=source.upper(), target_lang=target_lang
    )
    assert out.read_bytes() == v1
    assert not inline_markers(v1)
    check_structure(name, data, v1)


def check_structure(name: str, original: bytes, out: bytes) -> None:
    """The format's own checks: parsed, translated, codes kept."""
    left = formats.parse_document(name, out, formats.Limits()).segments
    if name.endswith((".xlf", ".sdlxliff")):
        assert left == []  # every unit without a target got one
        same_codes_per_unit(etree.fromstring(out))
    elif name.endswith((".po", ".pot")):
        assert left == []
        entries = [e for e in polib.pofile(out.decode()) if e.msgid and not e.obsolete]
        assert all(e.msgstr or all(e.msgstr_plural.values()) for e in entries)
    elif name.endswith(".docx"):
        document = python_docx.Document(io.BytesIO(out))
        assert len(document.paragraphs) == len(
            python_docx.Document(io.BytesIO(original)).paragraphs
        )
        assert (
            zipfile.ZipFile(io.BytesIO(out)).namelist()
            == zipfile.ZipFile(io.BytesIO(original)).namelist()
        )
    else:  # HTML and SRT: the same tags (alt and title are text), timings and units
        assert _tags(out) == _tags(original)
        assert len(left) == len(formats.parse_document(name, original, formats.Limits()).segments)
        if name.endswith(".srt"):
            timing = re.compile(rb"^\d+:\d+:\d+,\d+ --> .*$", re.M)
            assert timing.findall(out) == timing.findall(original)
    assert out.startswith(b"\xef\xbb\xbf") == original.startswith(b"\xef\xbb\xbf")
    if not name.endswith(".docx"):
        assert out.endswith(b"\n") == original.endswith(b"\n")
        assert (b"\r\n" in out) == (b"\r\n" in original)


def _tags(data: bytes) -> list[bytes]:
    return [TRANSLATED.sub(rb"\1", t) for t in TAG.findall(data)]


def same_codes_per_unit(root: etree._Element) -> None:
    """In every unit, the target holds the source's inline codes, each once."""
    for unit in root.iter("{*}trans-unit", "{*}segment"):
        source, target = unit.find("{*}source"), unit.find("{*}target")
        if target is None:
            continue
        assert _codes(target) == _codes(source), etree.tostring(unit)


def _codes(elem: etree._Element) -> Counter:
    return Counter(
        (etree.QName(e).localname, tuple(sorted(e.attrib.items())))
        for e in elem.iter()
        if e is not elem and etree.QName(e).localname in CODES
    )


def test_a_text_whose_language_has_no_model_to_the_target_is_refused(translator):
    # The corpus's model root knows es (a target of en-es) but has no model from es.
    spanish = "El anciano ve al perro pequeño y la mujer lee un libro en la casa."
    with pytest.raises(deepl.DeepLException, match="detected source language es"):
        translator.translate_text(spanish, target_lang="DE")
    german = translator.translate_text("Der alte Mann sieht den kleinen Hund.", target_lang="EN-GB")
    assert german.detected_source_lang == "DE"
