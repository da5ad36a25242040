"""The languages of a multilingual model beside a pair directory, in all three APIs."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture
def settings_overrides(settings_overrides, tiny_nllb, model_root, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "en-de").symlink_to(model_root / "en-de")
    (root / "nllb-200-tiny").symlink_to(tiny_nllb[0])
    return {**settings_overrides, "model_root": root}


def test_v1_lists_iso_codes_with_names_and_the_model_of_each_pair(client, auth):
    body = client.get("/v1/languages", headers=auth).get_json()
    languages = {entry["code"]: entry["name"] for entry in body["languages"]}
    assert languages["de"] == "German" and languages["ar"] == "Arabic"
    assert languages["zh_Hans"] == "Chinese (Simplified)"
    assert languages["zh_Hant"] == "Chinese (Traditional)"
    assert "deu_Latn" not in languages and "zho_Hans" not in languages
    models = {entry["pair"]: entry["model"] for entry in body["pairs"]}
    assert models["en-de"] == "en-de"  # the pair directory wins for its pair
    assert models["de-en"] == models["de-fr"] == "nllb-200-tiny"


def test_libretranslate_lists_its_own_codes(client):
    body = client.get("/libretranslate/languages").get_json()
    german = next(entry for entry in body if entry["code"] == "de")
    assert german["name"] == "German"
    assert {"fr", "en", "zh", "zt"} <= set(german["targets"])


def test_deepl_lists_sources_and_regional_targets(client, api_key):
    auth = {"Authorization": f"DeepL-Auth-Key {api_key}"}
    sources = client.get("/deepl/v2/languages?type=source", headers=auth).get_json()
    targets = client.get("/deepl/v2/languages?type=target", headers=auth).get_json()
    assert {"DE", "FR", "ZH"} <= {entry["language"] for entry in sources}
    codes = {entry["language"]: entry["name"] for entry in targets}
    assert codes["ZH-HANS"] == "Chinese (Simplified)" and codes["FR"] == "French"
    assert {"EN-GB", "EN-US"} <= set(codes) and "EN" not in codes


def test_a_pair_no_model_serves_is_refused_naming_a_few_pairs(client, auth):
    body = {"source_lang": "de", "target_lang": "xx", "segments": ["Hallo"]}
    response = client.post("/v1/jobs", json=body, headers=auth)
    assert response.status_code == 400
    message = response.get_json()["error"]["message"]
    assert "more (GET /v1/languages)" in message and len(message) < 2000


def test_a_pair_of_the_multilingual_model_is_accepted(client, auth):
    body = {"source_lang": "de", "target_lang": "zh_Hant", "segments": ["Hallo"]}
    assert client.post("/v1/jobs", json=body, headers=auth).status_code == 202
