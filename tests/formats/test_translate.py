"""A real translation with the demo model (models/en-de) of a sample of every format.

The worker's engine translates the segments (tags stripped, re-placed by alignment:
workers/markup.py), then each format rebuilds its file; every rule of docs/formats.md
is checked on the result.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import polib
import pytest
from lxml import etree

from stapel.formats import FORMATS, Limits, Options, render_document
from tests.formats.samples import HTML, PO, SRT, XLIFF2, XLIFF12, sample_docx
from workers.engine import Engine

MODELS = Path(__file__).resolve().parents[2] / "models"
X1 = "{urn:oasis:names:tc:xliff:document:1.2}"
X2 = "{urn:oasis:names:tc:xliff:document:2.0}"


@pytest.fixture(scope="module")
def engine():
    eng = Engine(MODELS, threads=1, max_loaded=1)
    yield eng
    for pair in eng.loaded_pairs():
        eng.model(pair).batcher.close()


def translated(engine, fmt: str, data: bytes, options: Options | None = None) -> bytes:
    options = options or Options()
    segments = FORMATS[fmt].extract(data, options, Limits())
    targets = engine.translate("en-de", segments)
    return render_document(fmt, data, targets, options, ("en", "de"))


def inner(elem) -> str:
    """An element's content as XML text, without its own tag."""
    text = etree.tostring(elem, encoding="unicode", with_tail=False)
    return text.split(">", 1)[1].rsplit("<", 1)[0]


def test_xliff12(engine):
    root = etree.fromstring(translated(engine, "xliff", XLIFF12))
    units = {u.get("id"): u for u in root.iter(f"{X1}trans-unit")}
    target = units["1"].find(f"{X1}target")
    assert inner(target) == 'Der <g id="1">alte Mann</g> sieht den kleinen Hund.'
    assert target.get("state") == "needs-review-translation"
    assert target.get("state-qualifier") == "leveraged-mt"
    assert units["2"].find(f"{X1}target") is None  # translate="no"
    assert units["4"].find(f"{X1}target") is None  # in a translate="no" group
    assert inner(units["3"].find(f"{X1}target")) == "Wir haben schon eins."  # kept
    five = inner(units["5"].find(f"{X1}target"))
    assert five == 'Der <bpt id="5">&lt;b&gt;</bpt>Hund<ept id="5">&lt;/b&gt;</ept> schläft.'
    assert units["5"].find(f"{X1}note").text == "Keep it short."
    assert root.find(f"{X1}file").get("target-language") == "de"


def test_xliff12_overwrites_existing_targets_when_asked(engine):
    root = etree.fromstring(translated(engine, "xliff", XLIFF12, Options(overwrite_targets=True)))
    unit = next(u for u in root.iter(f"{X1}trans-unit") if u.get("id") == "3")
    assert inner(unit.find(f"{X1}target")) == 'Wir haben <x id="2"/> ein neues Auto gekauft.'


def test_xliff2(engine):
    root = etree.fromstring(translated(engine, "xliff", XLIFF2))
    segments = list(root.iter(f"{X2}segment"))
    assert [s.get("state") for s in segments] == [
        "translated",
        "final",
        None,
        "translated",
        "translated",
    ]
    targets = [
        inner(s.find(f"{X2}target")) if s.find(f"{X2}target") is not None else None
        for s in segments
    ]
    assert targets == [
        'Der <pc id="1">alte Mann</pc> sieht den kleinen Hund.',
        "Der Hund schlaeft.",  # final: never touched
        None,  # translate="no" inherited from the group
        'Wir haben <ph id="2"/> ein neues Auto gekauft.',  # translate="yes" on the unit
        'Der <sc id="3"/>kleine Hund<ec startRef="3"/> schläft.',
    ]
    assert root.get("trgLang") == "de"


@pytest.mark.parametrize("fuzzy", [True, False])
def test_po(engine, fuzzy):
    po = polib.pofile(translated(engine, "po", PO, Options(mark_fuzzy=fuzzy)).decode())
    entries = {e.msgid: e for e in po}
    assert (
        entries["The old man sees %s the small dog."].msgstr
        == "Der alte Mann sieht %s den kleinen Hund."
    )
    plural = entries["%(count)d dog sleeps."]
    assert plural.msgstr_plural == {0: "%(count)d Hund schläft.", 1: "%(count)d Hunde schlafen."}
    assert (
        entries["We have bought {name} a new car."].msgstr
        == "Wir haben {name} ein neues Auto gekauft."
    )
    assert entries["The cat sleeps."].msgstr == "Die Katze schlaeft."  # already translated: kept
    assert ("fuzzy" in plural.flags) is fuzzy and "python-format" in plural.flags
    assert "fuzzy" not in entries["The cat sleeps."].flags
    assert po.header == "German translation of the demo."
    assert [e.msgstr for e in po.obsolete_entries()] == ["Der alte Hund."]


def test_srt(engine):
    out = translated(engine, "srt", SRT)
    assert (
        out
        == (
            "1\r\n00:00:01,000 --> 00:00:03,500\r\n"
            "Der alte Mann sieht\r\nden <i>kleinen Hund</i>.\r\n\r\n"
            "2\r\n00:00:04,000 --> 00:00:05,000 X1:40 X2:600\r\n"
            "{\\an8}Wir haben ein neues Auto gekauft.\r\n\r\n"
            "3\r\n0:00:06,5 --> 0:00:07,25\r\nDie Katze schläft.\r\n"
        ).encode()
    )


def test_html(engine):
    out = translated(engine, "html", HTML).decode()
    assert "<title>Der alte Mann.</title>" in out
    assert (
        '<p>Der <b>alte Mann</b> sieht den <a href="/dog?a=1&amp;b=2">kleinen Hund</a>.</p>' in out
    )
    assert '<p class="notranslate">The dog sleeps.</p>' in out
    assert (
        '<img src="car.png" alt="Das neue Auto." title="Das Auto."> ein neues Auto gekauft.' in out
    )
    assert '<div translate="no"><p>The cat sleeps.</p></div>' in out
    assert "<code>old man</code>" in out
    assert '<script>var s = "<b>The dog</b>";</script>' in out and "p { color: red; }" in out


def test_docx(engine):
    out = zipfile.ZipFile(io.BytesIO(translated(engine, "docx", sample_docx())))
    body = out.read("word/document.xml").decode()
    assert "<w:r><w:rPr><w:b/></w:rPr><w:t>alte Mann</w:t></w:r>" in body
    assert (
        '<w:hyperlink r:id="rId9"><w:r><w:t>Wir haben ein neues Auto gekauft.</w:t></w:r>'
        "</w:hyperlink>" in body
    )
    assert "<w:t>Der Hund</w:t></w:r><w:r><w:tab/></w:r>" in body
    assert "<w:tc><w:p><w:r><w:t>Die Katze schläft.</w:t></w:r></w:p></w:tc>" in body  # table
    assert "Der Hund schläft." in out.read("word/header1.xml").decode()
    assert "Der alte Mann schläft." in out.read("word/footnotes.xml").decode()
