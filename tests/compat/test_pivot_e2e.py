"""de -> fr through English, with de-en and en-fr installed: every API accepts it and a
real worker translates it in two steps."""

from __future__ import annotations

import pytest
import requests

from tests.factories import wait_for
from training.random_model import build as build_random_model
from workers.engine import Engine

pytestmark = pytest.mark.e2e

TEXTS = ["word one end", "another short line"]


@pytest.fixture(scope="module")
def live_overrides(live_overrides, model_root, tmp_path_factory):
    root = tmp_path_factory.mktemp("pivot-live")
    (root / "de-en").symlink_to(model_root / "de-en")
    build_random_model(root / "en-fr", seed=7)
    return {**live_overrides, "model_root": root}


@pytest.fixture(scope="module")
def expected(live_overrides):
    engine = Engine(live_overrides["model_root"], max_decoding_length=24)
    return engine.translate("en-fr", engine.translate("de-en", TEXTS))


def _job(live: str, auth: dict, pair: str, texts: list[str]) -> dict:
    source, target = pair.split("-")
    body = {"source_lang": source, "target_lang": target, "segments": texts}
    job = requests.post(f"{live}/v1/jobs", json=body, headers=auth, timeout=10).json()

    def finished():
        state = requests.get(f"{live}{job['links']['self']}", headers=auth, timeout=10).json()
        return state if state["status"] in ("succeeded", "failed") else None

    assert wait_for(finished, timeout=90, what="the job")["status"] == "succeeded"
    result = requests.get(f"{live}{job['links']['result']}", headers=auth, timeout=10).json()
    return result["documents"][0]


def test_v1_lists_and_translates_the_pivot_pair(live, live_key, expected):
    auth = {"Authorization": f"Bearer {live_key}"}
    listed = requests.get(f"{live}/v1/languages", headers=auth, timeout=10).json()
    assert {"source": "de", "target": "fr", "pair": "de-fr", "via": "en"} in listed["pairs"]
    document = _job(live, auth, "de-fr", TEXTS)
    assert document["segments"] == expected
    assert {p["pivot"] for p in document["provenance"]} == {"en"}


def test_each_step_reads_and_fills_its_own_models_cache(live, live_key, live_overrides):
    auth = {"Authorization": f"Bearer {live_key}"}
    texts = ["fresh words here", "and one more line"]
    english = _job(live, auth, "de-en", texts)  # the first step's model, directly
    pivoted = _job(live, auth, "de-fr", texts)
    assert {p["origin"] for p in pivoted["provenance"]} == {"mt"}  # the second step ran
    french = _job(live, auth, "en-fr", english["segments"])  # what the second step stored
    assert french["segments"] == pivoted["segments"]
    assert {p["origin"] for p in french["provenance"]} == {"cache"}
    again = _job(live, auth, "de-fr", texts)
    assert again["segments"] == pivoted["segments"]
    assert {p["origin"] for p in again["provenance"]} == {"cache"}  # both steps from cache


def test_libretranslate_and_deepl_translate_through_english(live, live_key, expected):
    lt = requests.post(
        f"{live}/libretranslate/translate",
        json={"q": TEXTS, "source": "de", "target": "fr", "api_key": live_key},
        timeout=60,
    )
    assert lt.status_code == 200, lt.text
    assert lt.json()["translatedText"] == expected
    dl = requests.post(
        f"{live}/deepl/v2/translate",
        json={"text": TEXTS, "source_lang": "DE", "target_lang": "FR"},
        headers={"Authorization": f"DeepL-Auth-Key {live_key}"},
        timeout=60,
    )
    assert dl.status_code == 200, dl.text
    assert [t["text"] for t in dl.json()["translations"]] == expected
