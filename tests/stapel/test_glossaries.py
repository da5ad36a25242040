"""Glossaries: the entry parser's rules, term matching and marking, and tenant scoping."""

from __future__ import annotations

import pytest

from stapel import glossaries
from stapel.exceptions import NotFound, QuotaFull, TooLarge, ValidationError
from stapel.formats.fragments import Markup
from stapel.keys import create_key

TERM = glossaries.TERM_TAG


@pytest.mark.parametrize(
    ("text", "fmt", "expected"),
    [
        ("Hund\tdog\nKatze\tcat", "tsv", {"Hund": "dog", "Katze": "cat"}),
        ("\n  Hund \t dog  \r\n\r\nKatze\tcat\n", "tsv", {"Hund": "dog", "Katze": "cat"}),
        ("Hund,dog\nKatze,cat", "csv", {"Hund": "dog", "Katze": "cat"}),
        ('"Hund, alt","old ""dog"""', "csv", {"Hund, alt": 'old "dog"'}),
        ("Hund,dog,de,en", "csv", {"Hund": "dog"}),
        ("Hund,dog,DE,EN-GB", "csv", {"Hund": "dog"}),
        ("AT&T\t<b>", "tsv", {"AT&T": "<b>"}),
    ],
)
def test_entries_parse(text, fmt, expected):
    assert glossaries.parse_entries(text, fmt, ("de", "en")) == expected


@pytest.mark.parametrize(
    ("text", "fmt", "needle"),
    [
        ("Hund dog", "tsv", "entry 1 has no tab between its terms"),
        ("Hund\tdog\tHund", "tsv", "entry 1 has more than one tab"),
        ("Hund\tdog\n\t cat", "tsv", "entry 2, source: the term is empty"),
        ("Hund\t  ", "tsv", "entry 1, target: the term is empty"),
        ("Hund\tdog\nHund\thound", "tsv", "entry 2 gives the source term 'Hund' again"),
        ("Hund\tdo\x85g", "tsv", "the term holds the control character U+0085"),
        ("Hu\u2028nd\tdog", "tsv", "the term holds the control character U+2028"),
        ('"Hu\nnd",dog', "csv", "the term holds the control character U+000A"),
        ("Hund", "csv", "entry 1 has no comma between its terms"),
        ("Hund,dog,de", "csv", "entry 1 has 3 fields"),
        ("Hund,dog,fr,en", "csv", "entry 1 is for fr-en, the glossary for de-en"),
        ('"Hund,dog', "csv", "the CSV entries are malformed"),
        ("\n \n", "tsv", "the glossary has no entries"),
        ("Hund\t" + "x" * 1025, "tsv", "the term is over 1024 UTF-8 bytes"),
        ("Hund\tdog", "xlsx", "Value for 'entries_format' not supported."),
    ],
)
def test_bad_entries_are_refused_naming_the_entry(text, fmt, needle):
    with pytest.raises(ValidationError) as raised:
        glossaries.parse_entries(text, fmt, ("de", "en"))
    assert needle in raised.value.message


def spans(entries: dict[str, str], text: str) -> list[str]:
    found = glossaries.terms(entries)
    return [text[a:b] for a, b in glossaries.find(found, text)]


@pytest.mark.parametrize(
    ("entries", "text", "expected"),
    [
        ({"Hund": "dog"}, "Der Hund, die Hunde, ein Hundehaus.", ["Hund"]),
        (
            {"Hund": "dog", "alter Hund": "old dog"},
            "Der alte Hund und der alter Hund.",
            ["Hund", "alter Hund"],
        ),
        ({"hund": "dog"}, "Der Hund.", []),  # case-sensitive
        ({"C++": "C++"}, "C++ und C++11", ["C++", "C++"]),  # no word boundary after '+'
        ({"a.b": "x"}, "aXb a.b", ["a.b"]),  # regex characters are literal
        ({"AT&amp;T": "y", "AT&T": "z"}, "AT&amp;T", ["AT&amp;T"]),  # matched escaped
    ],
)
def test_terms_match_longest_whole_words_case_sensitively(entries, text, expected):
    from html import escape

    assert spans(entries, escape(text, quote=False)) == [escape(e, quote=False) for e in expected]


def test_a_plain_text_is_escaped_and_its_terms_wrapped():
    found = glossaries.terms({"Hund": "dog", "AT&T": "AT&T Inc."})
    marked = glossaries.mark("Der Hund <3 AT&T", found, None)
    assert marked is not None
    assert marked.text == (f'Der <{TERM} i="0">Hund</{TERM}> &lt;3 <{TERM} i="1">AT&amp;T</{TERM}>')
    assert marked.targets == ["dog", "AT&T Inc."]
    translated = f'<{TERM} i="1">AT&amp;T</{TERM}> &amp; der &lt;x&gt; <{TERM} i="0">Hund</{TERM}>'
    assert glossaries.unmark(translated, marked, None) == "AT&T Inc. & der <x> dog"
    assert glossaries.mark("Die Katze", found, None) is None
    with pytest.raises(ValidationError, match=r"a text holding U\+000B cannot be translated"):
        glossaries.mark("Der\x0bHund", found, None)


def test_with_markup_only_text_outside_tags_and_ignored_elements_is_searched():
    found = glossaries.terms({"Hund": "dog & co", "b": "B"})
    xml = Markup("xml", frozenset({"keep"}))
    text = '<b title="Hund">Hund</b> <keep>Hund <i>Hund</i></keep> <x/>Hund<!-- Hund -->'
    marked = glossaries.mark(text, found, xml)
    assert marked is not None
    assert marked.text == (
        f'<b title="Hund"><{TERM} i="0">Hund</{TERM}></b> <keep>Hund <i>Hund</i></keep> '
        f'<x/><{TERM} i="1">Hund</{TERM}><!-- Hund -->'
    )
    assert glossaries.unmark(marked.text, marked, xml) == (
        '<b title="Hund">dog &amp; co</b> <keep>Hund <i>Hund</i></keep> '
        "<x/>dog &amp; co<!-- Hund -->"
    )
    html = Markup("html")
    marked = glossaries.mark(
        "<p>Hund<br>Hund <code>Hund</code></p><script>Hund</script>", found, html
    )
    assert marked is not None and len(marked.targets) == 2


def test_term_markup_ignores_the_term_element():
    assert glossaries.term_markup(None) == Markup("xml", frozenset({TERM}), outline=False)
    html = Markup("html", frozenset({"x"}))
    assert glossaries.term_markup(html).ignore == {"x", TERM}


@pytest.fixture
def tenants(session):
    mine = create_key(session, "acme")[0].tenant_id
    other = create_key(session, "globex")[0].tenant_id
    return mine, other


def test_create_get_list_entries_delete_scoped_by_tenant(session, tenants):
    mine, other = tenants
    entries = {"Hund": "dog", "Katze": "cat"}
    made = glossaries.create(session, mine, "pets", ("de", "en"), entries, max_entries=10, quota=5)
    assert made.entry_count == 2 and made.created_at is not None
    got = glossaries.get(session, mine, made.id)
    assert (got.name, got.source_lang, got.target_lang) == ("pets", "de", "en")
    assert glossaries.entries(session, got) == entries
    assert [g.id for g in glossaries.list_for(session, mine)] == [made.id]
    assert glossaries.list_for(session, other) == []
    with pytest.raises(NotFound, match="Glossary not found"):
        glossaries.get(session, other, made.id)
    with pytest.raises(NotFound):
        glossaries.delete_glossary(session, other, made.id)
    with pytest.raises(ValidationError, match="the glossary is for de-en, the request for en-de"):
        glossaries.terms_for(session, mine, made.id, ("en", "de"))
    assert glossaries.terms_for(session, mine, made.id, ("de", "en")).targets == entries
    glossaries.delete_glossary(session, mine, made.id)
    with pytest.raises(NotFound):
        glossaries.get(session, mine, made.id)


def test_limits_per_glossary_and_per_tenant(session, tenants):
    mine, _ = tenants
    with pytest.raises(TooLarge, match="the glossary has 3 entries; the limit is 2"):
        glossaries.create(
            session,
            mine,
            "big",
            ("de", "en"),
            {"a": "1", "b": "2", "c": "3"},
            max_entries=2,
            quota=5,
        )
    glossaries.create(session, mine, "one", ("de", "en"), {"a": "1"}, max_entries=2, quota=1)
    with pytest.raises(QuotaFull, match="a tenant may hold 1 glossaries"):
        glossaries.create(session, mine, "two", ("de", "en"), {"a": "1"}, max_entries=2, quota=1)
    with pytest.raises(ValidationError, match=r"Parameter 'name' not specified\."):
        glossaries.create(session, mine, " ", ("de", "en"), {"a": "1"}, max_entries=2, quota=5)
