"""Every format read and rebuilt with an identity translator gives its input back.

Byte for byte for SRT, HTML and DOCX (a segment whose translation equals its text keeps
its original bytes); XLIFF and PO gain targets equal to their sources (XLIFF keeping its
tool's spelling around them, PO in polib's form, docs/formats.md): rebuilding nothing
returns the input unchanged, and a rebuilt file read and rebuilt again stays the same.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import polib
import pytest
from lxml import etree

from stapel.formats import FORMATS, Limits, Options, inline, parse_document, render_document
from tests.formats.samples import HTML, PO, SRT, XLIFF2, XLIFF12, sample_docx

LANGS = ("en", "de")
SAMPLES = {
    "xliff12": ("xliff", XLIFF12),
    "xliff2": ("xliff", XLIFF2),
    "po": ("po", PO),
    "srt": ("srt", SRT),
    "html": ("html", HTML),
    "docx": ("docx", sample_docx()),
}
EXPECTED = {
    "xliff12": ["The <1>old man</1> sees the small dog.", "The <1>dog</1> sleeps."],
    "xliff2": [
        "The <1>old man</1> sees the small dog.",
        "We have bought <1/> a new car.",
        "The <1>small dog</1> sleeps.",
    ],
    "po": [
        "The old man sees <1/> the small dog.",
        "<1/> dog sleeps.",
        "<1/> dogs sleep.",
        "We have bought <1/> a new car.",
    ],
    "srt": [
        "The old man sees the <1>small dog</1>.",
        "<1/>We have bought a new car.",
        "The cat sleeps.",
    ],
    "html": [
        "The old man",
        "The <1>old man</1> sees the <2>small dog</2>.",
        "The new car",
        "The car",
        "We have bought <1/> a new car.",
        "The <1/> sleeps.",
    ],
    "docx": [
        "The <1>old man</1> sees the small dog.",
        "<1>We have bought a new car.</1>",
        "The dog<1/> sleeps.",
        "The cat sleeps.",
        "The dog sleeps.",
        "The old man sleeps.",
    ],
}


def segments(name: str, options: Options | None = None) -> list[str]:
    fmt, data = SAMPLES[name]
    return FORMATS[fmt].extract(data, options or Options(), Limits())


@pytest.mark.parametrize("name", SAMPLES)
def test_segments_are_what_the_rules_say(name):
    assert [inline.readable(s) for s in segments(name)] == EXPECTED[name]


@pytest.mark.parametrize("name", SAMPLES)
def test_nothing_translated_gives_the_input_back(name):
    fmt, data = SAMPLES[name]
    out = render_document(fmt, data, [None] * len(segments(name)), Options(), LANGS)
    assert out == data


@pytest.mark.parametrize("name", ["srt", "html", "docx"])
def test_identity_translation_is_byte_for_byte(name):
    fmt, data = SAMPLES[name]
    assert render_document(fmt, data, segments(name), Options(), LANGS) == data


@pytest.mark.parametrize("name", ["xliff12", "xliff2"])
def test_xliff_identity_targets_equal_sources_and_the_rest_is_kept(name):
    fmt, data = SAMPLES[name]
    out = render_document(fmt, data, segments(name), Options(), LANGS)
    before, after = etree.fromstring(data), etree.fromstring(out)
    filled = [t for t in after.iter("{*}target") if t.getparent().find("{*}source") is not None]
    assert filled
    for target in filled:
        source = target.getparent().find("{*}source")
        if target.get("state") or target.getparent().get("state") == "translated":
            assert _content(target) == _content(source)
    assert not FORMATS[fmt].extract(out, Options(), Limits())  # nothing left to translate
    # Apart from targets, states, the target language and indentation, nothing changed.
    assert _without_translations(before) == _without_translations(after)
    # The canonical form is stable.
    assert render_document(fmt, out, [], Options(), LANGS) == out


MT_VALUES = ("translated", "needs-review-translation", "leveraged-mt", "de")


def _without_translations(tree) -> bytes:
    for t in list(tree.iter("{*}target")):
        if t.get("state") or t.getparent().get("state") == "translated":
            t.getparent().remove(t)
    for e in tree.iter():
        e.text = None if e.text is not None and not e.text.strip() else e.text
        e.tail = None if e.tail is not None and not e.tail.strip() else e.tail
        for attr in ("state", "state-qualifier", "target-language", "trgLang"):
            if e.get(attr) in MT_VALUES:
                del e.attrib[attr]
    return etree.tostring(tree, method="c14n")


def _content(elem) -> bytes:
    copy = etree.fromstring(etree.tostring(elem))
    copy.tail = None
    return etree.tostring(copy, method="c14n").split(b">", 1)[1].rsplit(b"<", 1)[0]


def test_po_identity_fills_every_msgstr_and_keeps_the_rest():
    out = render_document("po", PO, segments("po"), Options(), LANGS)
    po = polib.pofile(out.decode())
    by_id = {e.msgid: e for e in po}
    assert (
        by_id["The old man sees %s the small dog."].msgstr == "The old man sees %s the small dog."
    )
    plural = by_id["%(count)d dog sleeps."]
    assert plural.msgstr_plural == {0: "%(count)d dog sleeps.", 1: "%(count)d dogs sleep."}
    assert "python-format" in plural.flags and "fuzzy" in plural.flags
    assert by_id["The cat sleeps."].msgstr == "Die Katze schlaeft."
    assert [e.msgid for e in po.obsolete_entries()] == ["The old dog."]
    assert po.header == "German translation of the demo."
    assert by_id["The old man sees %s the small dog."].occurrences == [("app.py", "10")]
    assert str(polib.pofile(out.decode())).encode() == out  # canonical form is stable


def test_docx_parts_not_translated_are_copied_unchanged():
    fmt, data = SAMPLES["docx"]
    texts = segments("docx")
    texts[-1] = "Der alte Mann schlaeft."  # only the footnote changes
    out = zipfile.ZipFile(io.BytesIO(render_document(fmt, data, texts, Options(), LANGS)))
    src = zipfile.ZipFile(io.BytesIO(data))
    assert [i.filename for i in out.infolist()] == [i.filename for i in src.infolist()]
    for name in src.namelist():
        same = out.read(name) == src.read(name)
        assert same == (name != "word/footnotes.xml"), name
    assert b"Der alte Mann schlaeft." in out.read("word/footnotes.xml")


@pytest.mark.parametrize(
    ("text", "count", "lines"),
    [
        ("Der alte Mann sieht den kleinen Hund.", 2, ["Der alte Mann sieht", "den kleinen Hund."]),
        ("Ja.", 2, ["Ja."]),  # never an empty line: it would end the cue
        ("a b c", 3, ["a", "b", "c"]),
        ("one two three four five six", 1, ["one two three four five six"]),
    ],
)
def test_srt_rebreak(text, count, lines):
    from stapel.formats.srt import rebreak

    assert rebreak(text, count) == lines


def test_srt_cue_with_fewer_lines_keeps_the_file_valid():
    targets = ["Ja.", "Gut.", "Die Katze schlaeft."]
    out = render_document("srt", SRT, targets, Options(), LANGS)
    assert out.split(b"\r\n\r\n")[0] == b"1\r\n00:00:01,000 --> 00:00:03,500\r\nJa."
    assert FORMATS["srt"].extract(out, Options(), Limits()) == [
        "Ja.",
        "Gut.",
        "Die Katze schlaeft.",
    ]


def _crlf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


LAYOUTS = {
    "crlf": _crlf,
    "bom": lambda b: b"\xef\xbb\xbf" + b,
    "no final newline": lambda b: b.rstrip(b"\r\n"),
    "all three": lambda b: b"\xef\xbb\xbf" + _crlf(b).rstrip(b"\r\n"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name", [n for n in SAMPLES if n != "docx"])
def test_a_rebuilt_file_keeps_the_originals_layout(name, layout):
    """BOM, XML declaration, line endings and the final newline are the original's."""
    fmt, data = SAMPLES[name]
    change = LAYOUTS[layout]
    options = Options(mark_fuzzy=False)

    def rebuilt(original: bytes) -> bytes:
        segments = FORMATS[fmt].extract(original, options, Limits())
        return render_document(fmt, original, list(segments), options, LANGS)

    assert rebuilt(change(data)) == change(rebuilt(data))


SDLXLIFF = b"""<?xml version="1.0" encoding="utf-8"?>
<xliff xmlns:sdl="http://sdl.com/FileTypes/SdlXliff/1.0"
 xmlns="urn:oasis:names:tc:xliff:document:1.2" version="1.2" sdl:version="1.0">
<file original="a.docx" datatype="x-sdlfilterframework2" source-language="en-US"
 target-language="de-DE"><body>
<trans-unit id="u1"><source><x id="ph8"/>The old man sleeps.</source>
<seg-source><mrk mtype="seg" mid="7"><x id="ph8"/>The old man sleeps.</mrk></seg-source>
<target><x id="ph8"/><mrk mtype="seg" mid="7"/></target></trans-unit>
</body></file></xliff>"""


def test_a_segmented_target_holds_each_code_once():
    """Trados' target keeps a code outside the empty segment the source holds it in."""
    parsed = parse_document("a.sdlxliff", SDLXLIFF, Limits())
    out = render_document("xliff", SDLXLIFF, ["X " + s for s in parsed.segments], Options(), LANGS)
    target = etree.fromstring(out).find(".//{urn:oasis:names:tc:xliff:document:1.2}target")
    codes = [e.get("id") for e in target.iter("{urn:oasis:names:tc:xliff:document:1.2}x")]
    assert codes == ["ph8"]


def test_a_translated_attribute_keeps_its_quote_character():
    page = b"<p>Before <img src='a.png' alt='text'/> after.</p>\n"
    segments = FORMATS["html"].extract(page, Options(), Limits())
    out = render_document("html", page, [s.upper() for s in segments], Options(), LANGS)
    assert b"alt='TEXT'" in out


CORPUS = Path(__file__).parent / "corpus"
TARGET = re.compile(rb"\s*(?:<target\b[^>]*/>|<target\b.*?</target>)", re.DOTALL)


@pytest.mark.parametrize("name", ["okapi-simpleTest.sdlxliff", "okapi-RB-12-Test02.xlf"])
def test_an_xliff_file_changes_only_in_its_targets(name):
    """Spacing in empty tags, quote characters, namespace order and the rest of a tool's
    spelling stay as the tool wrote them; only the written targets are new."""
    data = (CORPUS / name).read_bytes()
    parsed = parse_document(name, data, Limits())
    out = render_document("xliff", data, ["X " + s for s in parsed.segments], Options(), LANGS)
    assert out != data
    assert TARGET.sub(b"", out) == TARGET.sub(b"", data)


MSGSTR = re.compile(rb'^msgstr.*\n(?:".*"\n)*', re.MULTILINE)


def test_a_po_file_changes_only_in_its_msgstrs():
    """Comments, wrapping and the header stay as the tool wrote them."""
    data = (CORPUS / "polib-weird-occurrences.po").read_bytes()
    options = Options(mark_fuzzy=False)
    segments = FORMATS["po"].extract(data, options, Limits())
    out = render_document("po", data, ["X " + s for s in segments], options, LANGS)
    assert out != data
    assert MSGSTR.sub(b"", out) == MSGSTR.sub(b"", data)
