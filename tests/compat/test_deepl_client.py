"""The DeepL dialect with the official `deepl` client against a live stack."""

from __future__ import annotations

from datetime import datetime, timezone

import deepl
import pytest
import requests
from lxml import etree

from stapel.keys import create_key
from tests.compat.conftest import compat_jobs
from tests.factories import sentences
from tests.test_e2e import raw_translate

pytestmark = pytest.mark.e2e

GERMAN = "Der alte Mann sieht den kleinen Hund und die Frau liest ein Buch."


@pytest.fixture(scope="module")
def translator(live, live_key):
    # server_url keeps its trailing slash: the client joins paths with urljoin.
    return deepl.Translator(live_key, server_url=f"{live}/deepl/")


def test_translate_one_text(translator, model_root):
    text = sentences(1, seed=4)[0]
    result = translator.translate_text(text, source_lang="EN", target_lang="DE")
    assert result.text == raw_translate(model_root / "en-de", [text])[0]
    assert result.detected_source_lang == "EN"
    assert result.billed_characters == len(text)


def test_translate_a_list_with_a_regional_target(translator, model_root):
    texts = sentences(5, seed=9)
    results = translator.translate_text(texts, source_lang="de", target_lang="EN-GB")
    assert [r.text for r in results] == raw_translate(model_root / "de-en", texts)
    assert [r.billed_characters for r in results] == [len(t) for t in texts]


def test_translate_with_the_source_detected(translator, model_root):
    result = translator.translate_text(GERMAN, target_lang="EN-US")
    assert result.detected_source_lang == "DE"
    assert result.text == raw_translate(model_root / "de-en", [GERMAN])[0]


def test_each_translation_carries_its_score_and_the_client_reads_past_it(
    translator, live, live_key
):
    texts = sentences(3, seed=6)
    raw = requests.post(
        f"{live}/deepl/v2/translate",
        headers={"Authorization": f"DeepL-Auth-Key {live_key}"},
        json={"text": texts, "source_lang": "EN", "target_lang": "DE"},
        timeout=60,
    ).json()["translations"]
    assert all(0 < t["score"] <= 1 for t in raw)
    results = translator.translate_text(texts, source_lang="EN", target_lang="DE")
    assert [r.text for r in results] == [t["text"] for t in raw]
    assert [r.billed_characters for r in results] == [t["billed_characters"] for t in raw]


def test_source_and_target_languages(translator):
    assert [(lang.code, lang.name) for lang in translator.get_source_languages()] == [
        ("DE", "German"),
        ("EN", "English"),
    ]
    targets = translator.get_target_languages()
    assert [lang.code for lang in targets] == ["EN-GB", "EN-US", "DE"]
    assert not any(lang.supports_formality for lang in targets)


def test_usage_counts_the_characters_billed(translator):
    before = translator.get_usage()
    assert before.character.valid and not before.any_limit_reached
    assert before.character.limit == 10**12  # no STAPEL_QUOTA_CHARACTERS_PER_DAY
    translator.translate_text(["Hallo Welt.", "Gut."], source_lang="DE", target_lang="EN-US")
    assert translator.get_usage().character.count == before.character.count + 15


def test_translate_document_end_to_end(translator, tmp_path, model_root, live_app):
    lines = sentences(4, seed=11)
    source = tmp_path / "chapter.txt"
    source.write_text("\n".join(lines[:2]) + "\n\n" + "\n".join(lines[2:]) + "\n")
    target = tmp_path / "chapter.de.txt"
    before = {job.id for job in compat_jobs(live_app, "deepl")}
    status = translator.translate_document_from_filepath(source, target, target_lang="DE")
    assert status.done and status.billed_characters == sum(len(line) for line in lines)
    expected = raw_translate(model_root / "en-de", lines)
    assert target.read_text() == "\n".join(expected[:2]) + "\n\n" + "\n".join(expected[2:]) + "\n"
    # Downloaded, so deleted: the document's job is gone, the text jobs are kept.
    assert {job.id for job in compat_jobs(live_app, "deepl")} == before


def test_a_document_result_is_given_once(translator, tmp_path):
    with open(tmp_path / "a.txt", "w") as f:
        f.write("Hallo Welt.\n")
    with open(tmp_path / "a.txt", "rb") as f:
        handle = translator.translate_document_upload(f, source_lang="DE", target_lang="EN-GB")
    assert translator.translate_document_wait_until_done(handle).status.value == "done"
    first = translator.translate_document_download(handle)
    assert first.content.decode().count("\n") == 1
    with pytest.raises(deepl.DeepLException, match="Not found"):
        translator.translate_document_download(handle)


PETS = {"Hund": "Zorblax", "alte Mann": "Quibbert & Co", "Katze": "Mewtwix"}
"""Target terms no random-weight model emits by chance."""


@pytest.fixture(scope="module")
def other_translator(live, live_app):
    """A translator of another tenant on the same stack."""
    with live_app.extensions["stapel"].sessions() as s:
        key = create_key(s, "globex")[1]
    return deepl.Translator(key, server_url=f"{live}/deepl/")


@pytest.fixture(scope="module")
def pets(translator):
    return translator.create_glossary("pets", source_lang="DE", target_lang="EN-GB", entries=PETS)


def test_a_glossary_is_made_listed_and_read(translator, pets):
    assert (pets.name, pets.source_lang, pets.target_lang) == ("pets", "DE", "EN")
    assert pets.ready and pets.entry_count == 3
    assert abs((datetime.now(timezone.utc) - pets.creation_time).total_seconds()) < 120
    assert pets.glossary_id in [g.glossary_id for g in translator.list_glossaries()]
    got = translator.get_glossary(pets.glossary_id)
    assert (got.glossary_id, got.name, got.entry_count) == (pets.glossary_id, "pets", 3)
    assert translator.get_glossary_entries(pets) == PETS


def test_translate_with_a_glossary_puts_each_target_term_in_once(translator, pets, model_root):
    texts = [
        "Der alte Mann sieht den Hund und den Hund.",
        "Hund",
        "Die Frau liest ein Buch.",  # no term: the model's own translation
    ]
    results = translator.translate_text(texts, source_lang="DE", target_lang="EN-GB", glossary=pets)
    first = results[0].text
    assert first.count("Quibbert & Co") == 1 and first.count("Zorblax") == 2
    assert "<" not in first and "&amp;" not in first  # plain text: no markup left
    assert results[1].text == "Zorblax"
    assert results[2].text == raw_translate(model_root / "de-en", [texts[2]])[0]
    assert [r.billed_characters for r in results] == [len(t) for t in texts]


def test_a_glossary_with_xml_tags_matches_outside_tags_only(translator, pets):
    text = '<p title="Hund">Der <b>Hund</b> und <keep>die Katze</keep>.</p>'
    result = translator.translate_text(
        text,
        source_lang="DE",
        target_lang="EN-US",
        glossary=pets.glossary_id,
        tag_handling="xml",
        ignore_tags="keep",
    )
    out = result.text
    assert out.startswith('<p title="Hund">') and "<keep>die Katze</keep>" in out
    assert out.count("Zorblax") == 1 and "Mewtwix" not in out
    assert "<b>" in out and "</b>" in out
    etree.fromstring(f"<r>{out}</r>".encode())


def test_a_glossary_is_the_tenants_own(other_translator, pets):
    with pytest.raises(deepl.GlossaryNotFoundException):
        other_translator.get_glossary(pets.glossary_id)
    with pytest.raises(deepl.GlossaryNotFoundException):
        other_translator.get_glossary_entries(pets.glossary_id)
    with pytest.raises(deepl.GlossaryNotFoundException):
        other_translator.delete_glossary(pets.glossary_id)
    assert other_translator.list_glossaries() == []
    with pytest.raises(deepl.DeepLException, match="Glossary not found"):
        other_translator.translate_text(
            "Hund", source_lang="DE", target_lang="EN-GB", glossary=pets.glossary_id
        )


def test_a_deleted_glossary_is_not_found(translator):
    made = translator.create_glossary("tmp", source_lang="EN", target_lang="DE", entries={"a": "b"})
    translator.delete_glossary(made)
    with pytest.raises(deepl.GlossaryNotFoundException):
        translator.get_glossary(made.glossary_id)
    with pytest.raises(deepl.GlossaryNotFoundException):
        translator.delete_glossary(made.glossary_id)


def test_glossary_languages_are_the_model_roots_pairs(translator):
    pairs = {(p.source_lang, p.target_lang) for p in translator.get_glossary_languages()}
    assert pairs == {("de", "en"), ("en", "de")}
