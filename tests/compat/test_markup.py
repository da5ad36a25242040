"""Markup through the dialects on a live stack: LibreTranslate's format=html as Mastodon
sends it, and DeepL's tag_handling=xml|html with the official client (Weblate's DeepL
engine: placeables as ignored `<x id="N"></x>` tags).

The words outside the tags must be the model's translation of the text without them,
every tag must come back with its bytes (attributes untouched), ignored elements whole,
and the result must be well-formed.
"""

from __future__ import annotations

import html
import re

import deepl
import pytest
import requests
from lxml import etree

from stapel.formats import htmlruns
from tests.compat.conftest import compat_jobs
from tests.test_e2e import raw_translate

pytestmark = pytest.mark.e2e

TAG = re.compile(r"<[^>]*>")
LINK = '<a href="https://example.org/@dog?a=1&amp;b=2" rel="nofollow noopener" target="_blank">'
POST = f"<p>The old man sees the {LINK}small dog</a>.</p>"
WEBLATE = 'The old man sees <x id="17"></x> the small dog.'


def words(text: str) -> str:
    """The text outside the tags, entities decoded, spaces collapsed."""
    return re.sub(r"\s+", " ", html.unescape(TAG.sub(" ", text))).strip()


def well_formed_xml(text: str) -> None:
    etree.fromstring(f"<r>{text}</r>".encode())


@pytest.fixture(scope="module")
def translator(live, live_key):
    return deepl.Translator(live_key, server_url=f"{live}/deepl/")


def test_mastodon_sends_a_list_with_format_html(live, live_key, model_root, live_app):
    posts = [POST, "<p>The woman reads a book.</p><p><br></p>", "<p><br></p>"]
    before = len(compat_jobs(live_app, "libretranslate"))
    response = requests.post(
        f"{live}/libretranslate/translate",
        json={"q": posts, "source": "en", "target": "de", "format": "html", "api_key": live_key},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    out = response.json()["translatedText"]
    expected = raw_translate(
        model_root / "en-de", ["The old man sees the small dog.", "The woman reads a book."]
    )
    assert [words(t) for t in out] == [*expected, ""]
    assert out[1].endswith("</p><p><br></p>") and out[2] == "<p><br></p>"
    for text, sent in zip(out, posts, strict=True):
        assert TAG.findall(text) == TAG.findall(sent)  # every tag, its bytes, its order
        htmlruns.units(text)  # nests
    jobs = compat_jobs(live_app, "libretranslate")[before:]
    assert len(jobs) == 1 and jobs[0].segments_total == 2  # the words of both posts, one job


def test_format_html_with_the_source_detected(live, live_key, model_root):
    german = "<p>Der alte Mann sieht den <b>kleinen Hund</b>.</p>"
    response = requests.post(
        f"{live}/libretranslate/translate",
        data={"q": german, "source": "auto", "target": "en", "format": "html", "api_key": live_key},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["detectedLanguage"] == {"confidence": 100.0, "language": "de"}
    out = body["translatedText"]
    assert words(out) == raw_translate(model_root / "de-en", [words(german)])[0]
    assert TAG.findall(out) == TAG.findall(german)


def test_malformed_html_is_the_dialects_400(live, live_key):
    response = requests.post(
        f"{live}/libretranslate/translate",
        json={
            "q": "<p>Hi <b>x</p>",
            "source": "en",
            "target": "de",
            "format": "html",
            "api_key": live_key,
        },
        timeout=60,
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": "text 0 is not well-formed HTML at line 1, column 11: </p> closes <b> "
        "(line 1, column 7), which is still open"
    }


def test_weblate_placeables_as_ignored_xml_tags(translator, model_root):
    texts = [WEBLATE, 'The <b>old man</b> sees <x id="3"></x>.']
    results = translator.translate_text(
        texts, source_lang="EN", target_lang="DE", tag_handling="xml", ignore_tags=["x"]
    )
    first = results[0].text
    plain = raw_translate(model_root / "en-de", ["The old man sees the small dog."])[0]
    assert words(first) == plain
    assert '<x id="17"></x>' in first  # verbatim: Weblate looks for exactly this
    assert sorted(TAG.findall(results[1].text)) == sorted(TAG.findall(texts[1]))
    for result in results:
        well_formed_xml(result.text)
    # Billed outside the tags, as DeepL bills.
    assert [r.billed_characters for r in results] == [len(TAG.sub("", t)) for t in texts]


def test_ignored_xml_content_stays_untranslated(translator):
    text = "The <b>old man</b> sees <keep a='1'>the small dog</keep>."
    # The client's tag_handling_version (v1 or v2) names Stapel's one tag algorithm.
    result = translator.translate_text(
        text,
        source_lang="EN",
        target_lang="DE",
        tag_handling="xml",
        ignore_tags="keep",
        tag_handling_version="v2",
    )
    assert "<keep a='1'>the small dog</keep>" in result.text
    assert sorted(TAG.findall(result.text)) == sorted(TAG.findall(text))
    well_formed_xml(result.text)


def test_xml_structure_is_split_into_its_parts(translator, model_root):
    one, two = "The old man sees the small dog.", "The woman reads a book."
    text = f'<doc lang="en">\n  <p>{one}</p>\n  <p id="2">{two}</p>\n</doc>'
    result = translator.translate_text(text, source_lang="EN", target_lang="DE", tag_handling="xml")
    a, b = (html.escape(t, quote=False) for t in raw_translate(model_root / "en-de", [one, two]))
    assert result.text == f'<doc lang="en">\n  <p>{a}</p>\n  <p id="2">{b}</p>\n</doc>'
    flat = translator.translate_text(
        "The old man sees the small dog. <s/> The woman reads a book.",
        source_lang="EN",
        target_lang="DE",
        tag_handling="xml",
        splitting_tags="s",
        outline_detection=False,
    )
    assert flat.text == f"{a} <s/> {b}"


@pytest.mark.parametrize(
    "head", ["<!DOCTYPE html>\n", "<!-- <!DOCTYPE html [<!ENTITY e 'x'>]> -->\n"]
)
def test_xml_text_opening_with_a_doctype_translates(translator, model_root, head):
    """The official client's own tests send such a text with tag_handling=xml."""
    one = "The old man sees the small dog."
    text = f"{head}<html>\n<body>\n<p>{one}</p>\n</body>\n</html>"
    result = translator.translate_text(text, source_lang="EN", target_lang="DE", tag_handling="xml")
    (a,) = (html.escape(t, quote=False) for t in raw_translate(model_root / "en-de", [one]))
    assert result.text == text.replace(one, a)


def test_tag_handling_html_keeps_attributes(translator, model_root):
    result = translator.translate_text(
        POST.replace("<p>", '<p title="A title." class="post">'),
        source_lang="EN",
        target_lang="DE",
        tag_handling="html",
    )
    assert result.text.startswith('<p title="A title." class="post">')
    assert (
        words(result.text)
        == raw_translate(model_root / "en-de", ["The old man sees the small dog."])[0]
    )
    assert TAG.findall(result.text) == TAG.findall(
        POST.replace("<p>", '<p title="A title." class="post">')
    )


def test_malformed_xml_is_the_dialects_400(translator):
    with pytest.raises(deepl.DeepLException) as raised:
        translator.translate_text(
            "Hello <b>world</i>.", source_lang="EN", target_lang="DE", tag_handling="xml"
        )
    assert "not well-formed XML" in str(raised.value)
    assert "</i> does not close <b>" in str(raised.value)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('Normal para<x id="7"></x>graph', "xml"),
        ('Para<x id="1"/>graph', "xml"),
        ("Para<b>gr</b>aph", "xml"),
        ("Para<b>gr</b>aph", "html"),
    ],
)
def test_a_tag_inside_a_word_comes_back_once(translator, text, kind):
    result = translator.translate_text(text, source_lang="EN", target_lang="DE", tag_handling=kind)
    assert sorted(TAG.findall(result.text)) == sorted(TAG.findall(text))
    well_formed_xml(result.text)


def test_a_tag_inside_a_word_through_libretranslate(live, live_key):
    response = requests.post(
        f"{live}/libretranslate/translate",
        json={
            "q": ["Para<b>gr</b>aph", "The old man sees the small dog."],
            "source": "en",
            "target": "de",
            "format": "html",
            "api_key": live_key,
        },
        timeout=60,
    )
    assert response.status_code == 200, response.text
    out = response.json()["translatedText"]
    assert TAG.findall(out[0]) == ["<b>", "</b>"]
    well_formed_xml(out[0])
