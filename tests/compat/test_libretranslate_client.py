"""The LibreTranslate dialect with its real client (libretranslatepy) against a live stack."""

from __future__ import annotations

import pytest
import requests
from libretranslatepy import LibreTranslateAPI

from tests.compat.conftest import compat_jobs
from tests.factories import sentences
from tests.test_e2e import raw_translate

pytestmark = pytest.mark.e2e

GERMAN = "Der alte Mann sieht den kleinen Hund und die Frau liest ein Buch."
ENGLISH = "The old man sees the small dog and the woman reads a book."


@pytest.fixture(scope="module")
def lt(live, live_key):
    return LibreTranslateAPI(f"{live}/libretranslate/", api_key=live_key)


def test_translate_a_string_with_the_client(lt, model_root, live_app):
    text = sentences(1)[0]
    assert (
        lt.translate(text, "en", "de", timeout=60) == raw_translate(model_root / "en-de", [text])[0]
    )
    (job,) = compat_jobs(live_app, "libretranslate")
    assert job.status == "succeeded" and job.priority == 10 and job.segments_total == 1


def test_translate_a_list_keeps_length_and_order(live, live_key, model_root):
    texts = sentences(7, seed=3) + [""]
    response = requests.post(
        f"{live}/libretranslate/translate",
        json={"q": texts, "source": "EN", "target": "de", "format": "text", "api_key": live_key},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"translatedText", "score"}
    assert body["translatedText"] == raw_translate(model_root / "en-de", texts[:-1]) + [""]
    # each text's score, as /v1 gives it; the blank text has no words, so no score
    assert all(0 < score <= 1 for score in body["score"][:-1]) and body["score"][-1] is None


def test_the_client_reads_past_the_score(lt, live, live_key):
    text = sentences(1, seed=5)[0]
    raw = requests.post(
        f"{live}/libretranslate/translate",
        data={"q": text, "source": "en", "target": "de", "api_key": live_key},
        timeout=60,
    ).json()
    assert 0 < raw["score"] <= 1
    assert lt.translate(text, "en", "de", timeout=60) == raw["translatedText"]


def test_auto_source_detects_each_item(live, live_key, model_root):
    response = requests.post(
        f"{live}/libretranslate/translate",
        json={"q": [GERMAN, ENGLISH], "source": "auto", "target": "en", "api_key": live_key},
        timeout=60,
    )
    # Ranked among the model root's languages, as /detect ranks them: the English item
    # is in the target language already and comes back as it was.
    assert response.status_code == 200, response.text
    body = response.json()
    assert [d["language"] for d in body["detectedLanguage"]] == ["de", "en"]
    assert body["translatedText"] == [*raw_translate(model_root / "de-en", [GERMAN]), ENGLISH]


def test_detect_ranks_the_model_roots_languages(lt):
    ranked = lt.detect(GERMAN, timeout=10)
    assert [r["language"] for r in ranked] == ["de", "en"]
    assert ranked[0]["confidence"] > 90 and sum(r["confidence"] for r in ranked) == pytest.approx(
        100, abs=0.2
    )
    assert lt.detect(ENGLISH, timeout=10)[0]["language"] == "en"


def test_languages_lists_each_language_with_its_targets(lt):
    assert lt.languages(timeout=10) == [
        {"code": "de", "name": "German", "targets": ["en"]},
        {"code": "en", "name": "English", "targets": ["de"]},
    ]


@pytest.mark.parametrize("name", ["film.srt", "letter.docx", "notes.txt"])
def test_translate_file_answers_the_file_in_its_own_format(live, live_key, name):
    from tests.compat.test_deepl_documents import MEDIA, through_v1
    from tests.formats.samples import SRT, sample_docx

    content = {"film.srt": SRT, "letter.docx": sample_docx(), "notes.txt": b"Hello world."}[name]
    response = requests.post(
        f"{live}/libretranslate/translate_file",
        data={"source": "en", "target": "de", "api_key": live_key},
        files={"file": (name, content)},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    result = requests.get(response.json()["translatedFileUrl"], timeout=60)
    assert result.headers["Content-Type"] == MEDIA[name.rsplit(".", 1)[1]]
    # read whole before the status: a cut cannot pass for the end of the file
    assert result.headers["Content-Length"] == str(len(result.content))
    assert result.content == through_v1(live, live_key, name, content)
