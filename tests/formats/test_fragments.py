"""Markup in a request's texts (stapel.formats.fragments): segments out, the text rebuilt.

The rules are a table; the rebuild keeps every byte it does not translate, nests as the
source does whatever the codes' placement, and a real translation with the demo model
(models/en-de, through the worker's engine and its aligner) keeps the tags on the words.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from lxml import etree

from stapel.formats import align, htmlruns, inline
from stapel.formats.align import at_edges
from stapel.formats.base import FormatError
from stapel.formats.fragments import Markup, parse
from workers.engine import Engine

MODELS = Path(__file__).resolve().parents[2] / "models"
HTML, XML = Markup("html"), Markup("xml")
TAG = re.compile(r"<[^>]*>")


def ignoring(kind: str, *tags: str, **options) -> Markup:
    return Markup(kind, frozenset(tags), **options)


@pytest.mark.parametrize(
    ("text", "markup", "segments"),
    [
        ('<p>Hello <a href="/x?a=1&amp;b=2">world</a></p>', HTML, ["Hello <1>world</1>"]),
        ("<p>One.</p>\n<p>Two <b>x</b>.</p>", HTML, ["One.", "Two <1>x</1>."]),
        ('<img alt="A car." src="c.png"> The car.', HTML, ["<1/> The car."]),
        ("Run <code>ls -l</code> now.", HTML, ["Run <1/> now."]),
        ('Keep <x id="3"></x> it.', ignoring("html", "X"), ["Keep <1/> it."]),
        ("<br>", HTML, []),
        # A block inside an inline element: each run holds half of <b>, as an open or close.
        ("<b>x <i>y</i> a<div>b</div>c</b>", HTML, ["<1>x <2>y</2> a", "b", "c</1>"]),
        ("a &amp; b", HTML, ["a & b"]),
        (
            'Hello <x id="0"></x> world <b>big</b>!',
            ignoring("xml", "x"),
            ["Hello <1/> world <2>big</2>!"],
        ),
        ("A <keep>secret words</keep> here.", ignoring("xml", "keep"), ["A <1/> here."]),
        ("<doc><p>One.</p>\n<p>Two <i>x</i>.</p></doc>", XML, ["One.", "Two <1>x</1>."]),
        (
            "<doc><p>One.</p> <p>Two.</p></doc>",
            Markup("xml", outline=False),
            ["<1><2>One.</2> <3>Two.</3></1>"],
        ),
        (
            "<doc><p>One.</p> <p>Two.</p></doc>",
            Markup("xml", non_splitting=frozenset({"p"})),
            ["<1>One.</1> <2>Two.</2>"],
        ),
        (
            "A <b>b <p>c</p> d</b> e",
            Markup("xml", splitting=frozenset({"p"})),
            ["A", "b", "c", "d", "e"],
        ),
        ("A <!-- note --> &amp; <![CDATA[x<y]]> <?pi x?>e", XML, ["A <1/> & <2/> <3/>e"]),
        ("<x/>", XML, []),
        ("  One.\n Two <b>x</b>. ", XML, ["One.\n Two <1>x</1>."]),  # XML keeps line breaks
        ("  One.\n Two <b>x</b>. ", HTML, ["One. Two <1>x</1>."]),  # HTML collapses them
    ],
)
def test_segments(text, markup, segments):
    fragment = parse(text, markup)
    assert [inline.readable(s) for s in fragment.segments] == segments
    assert fragment.rebuild(fragment.segments) == text  # untranslated: byte for byte


@pytest.mark.parametrize(
    ("text", "markup", "where"),
    [
        ("<b>Hello", HTML, "<b> is never closed"),
        ("<p>Hello </i></p>", HTML, "</i> closes nothing"),
        ("<b><i>x</b></i>", HTML, "</b> closes <i>"),
        ("<b>Hello", XML, "<b> is never closed"),
        ("Hello </b>", XML, "</b> closes nothing"),
        ("<b>Hello</i>", XML, "</i> does not close <b>"),
        ("a &nbsp; b", XML, "Entity 'nbsp' not defined"),
        ('<a b="1>x</a>', XML, "Unescaped '<'"),
        ('<!DOCTYPE x [<!ENTITY e "y">]><x/>', XML, "DOCTYPE"),
        ("a \ufdd01\ufdd3 b", HTML, "U+FDD0..U+FDD3"),
    ],
)
def test_malformed_markup_is_refused_with_its_position(text, markup, where):
    with pytest.raises(FormatError) as raised:
        parse(text, markup)
    assert where in raised.value.message
    assert raised.value.line == 1 and 1 <= (raised.value.column or 0) <= len(text) + 1


def test_translations_are_escaped_and_tags_kept_verbatim():
    fragment = parse('<p title="T &amp; C">A <b class="x">b</b></p>', HTML)
    (segment,) = fragment.segments
    target = segment.replace("A", "1 < 2 &").replace("b", "bold")
    out = fragment.rebuild([target])
    assert out == '<p title="T &amp; C">1 &lt; 2 &amp; <b class="x">bold</b></p>'


WORD = st.sampled_from(["old", "man", "sees", "the", "dog", "&amp;", "a.b"])
NAME = st.sampled_from(["b", "i", "x", "ph", "span"])


@st.composite
def fragments(draw, depth: int = 0) -> str:
    """A well-formed XML fragment: words, elements (with attributes), empty elements."""
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        choice = draw(st.integers(0, 3 if depth < 3 else 0))
        if choice <= 1:
            parts.append(draw(WORD))
        elif choice == 2:
            name = draw(NAME)
            parts.append(
                f'<{name} id="{draw(st.integers(0, 9))}">{draw(fragments(depth + 1))}</{name}>'
            )
        else:
            parts.append(f"<{draw(NAME)}/>")
    return " ".join(parts)


@settings(max_examples=150, deadline=None)
@given(fragments(), st.booleans(), st.sampled_from(["", "x", "ph"]))
def test_a_rebuilt_xml_text_is_well_formed_with_every_tag_once(text, outline, ignored):
    markup = Markup("xml", frozenset({ignored} - {""}), outline=outline)
    fragment = parse(text, markup)
    # The worker's fallback placement (all codes at the ends) and a reversed word order.
    targets = [at_edges(s, " ".join(reversed(inline.strip(s).split()))) for s in fragment.segments]
    out = fragment.rebuild(targets)
    etree.fromstring(f"<r>{out}</r>".encode())  # well-formed
    assert sorted(TAG.findall(out)) == sorted(TAG.findall(text))
    htmlruns.units(out)  # and it nests as HTML too


@st.composite
def html_fragments(draw, depth: int = 0) -> str:
    """HTML with inline elements, blocks inside them (`<b>a<div>b</div></b>`) and `<br>`."""
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        choice = draw(st.integers(0, 3 if depth < 3 else 0))
        if choice <= 1:
            parts.append(draw(WORD))
        elif choice == 2:
            name = draw(st.sampled_from(["b", "i", "span", "div", "p"]))
            parts.append(f'<{name} class="c">{draw(html_fragments(depth + 1))}</{name}>')
        else:
            parts.append("<br>")
    return " ".join(parts)


def placed_at_random(segment: str, data) -> str:
    """The segment's codes placed by align.place for a shuffled translation and random
    attention: any alignment the model could return."""
    plain = inline.strip(segment)
    words = plain.split()
    target = data.draw(st.permutations(words)) if words else []
    rows = [[data.draw(st.sampled_from([0.0, 0.0, 0.1, 0.6])) for _ in words] for _ in target]
    aligned = align.Aligned(
        " ".join(target), ["\u2581" + w for w in words], ["\u2581" + w for w in target], rows
    )
    return align.place(segment, aligned)


@settings(max_examples=150, deadline=None)
@given(st.one_of(fragments(), html_fragments()), st.data())
def test_any_alignment_rebuilds_well_nested_markup(text, data):
    kind = "html" if "<br>" in text or 'class="c"' in text else "xml"
    fragment = parse(text, Markup(kind))
    out = fragment.rebuild([placed_at_random(s, data) for s in fragment.segments])
    note(f"{text!r} -> {out!r}")
    assert sorted(TAG.findall(out)) == sorted(TAG.findall(text))
    htmlruns.units(out)  # raises FormatError unless every element nests
    if kind == "xml":
        etree.fromstring(f"<r>{out}</r>".encode())


@pytest.fixture(scope="module")
def engine():
    eng = Engine(MODELS, threads=1, max_loaded=1)
    yield eng
    for pair in eng.loaded_pairs():
        eng.model(pair).batcher.close()


@pytest.mark.parametrize(
    ("text", "markup", "expected"),
    [
        (
            '<p>The old man sees the <a href="https://example.org/dog?a=1&amp;b=2" '
            'rel="nofollow">small dog</a>.</p>',
            HTML,
            '<p>Der alte Mann sieht den <a href="https://example.org/dog?a=1&amp;b=2" '
            'rel="nofollow">kleinen Hund</a>.</p>',
        ),
        (
            "<p>The <b>old man</b> sees the small dog.</p><p>The woman reads a book.</p>",
            HTML,
            "<p>Der <b>alte Mann</b> sieht den kleinen Hund.</p><p>Die Frau liest ein Buch.</p>",
        ),
        (
            'The old man sees <x id="12"></x> the small dog.',
            ignoring("xml", "x"),
            'Der alte Mann sieht <x id="12"></x> den kleinen Hund.',
        ),
        (
            "<doc><p>The old man sees the small dog.</p>"
            "<p>The woman reads a <i>book</i>.</p></doc>",
            XML,
            "<doc><p>Der alte Mann sieht den kleinen Hund.</p>"
            "<p>Die Frau liest ein <i>Buch</i>.</p></doc>",
        ),
        (
            "The old man sees the small dog.\nThe woman reads a book.",
            XML,
            "Der alte Mann sieht den kleinen Hund.\nDie Frau liest ein Buch.",
        ),
    ],
)
def test_a_real_translation_keeps_the_tags_on_their_words(engine, text, markup, expected):
    fragment = parse(text, markup)
    assert fragment.rebuild(engine.translate("en-de", fragment.segments)) == expected


def test_ignored_content_is_not_translated(engine):
    text = "The <b>old man</b> sees <keep>the small dog</keep>."
    for markup in (ignoring("xml", "keep"), ignoring("html", "keep")):
        fragment = parse(text, markup)
        out = fragment.rebuild(engine.translate("en-de", fragment.segments))
        assert "<keep>the small dog</keep>" in out and out.startswith("Der <b>alte Mann</b>")


@pytest.mark.parametrize(
    ("text", "markup", "characters"),
    [
        ("Plain  text <b>", None, 15),
        ('The old man sees <x id="1"></x> the dog.', ignoring("xml", "x"), 26),
        ("<p>A &amp; B</p>\n<p>C</p>", HTML, 6),
        ("<doc>\n  <p>One.</p>\n</doc>", XML, 4),
    ],
)
def test_characters_billed_are_those_outside_the_tags(text, markup, characters):
    assert parse(text, markup).characters == characters
