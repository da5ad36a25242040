"""A segment's score and review flag in each format's own terms (docs/quality.md).

XLIFF 1.2: an `<alt-trans origin="stapel" match-quality>` holding the target, the
target's `state` by the review flag. XLIFF 2: an `<mtc:match>` with `matchQuality` that
refers to the segment, `subState="stapel:needs-review"`. PO: a `stapel-score:`
translator comment and `fuzzy` on an entry to review.
"""

from __future__ import annotations

import polib
import pytest
from lxml import etree

from stapel.formats import Mark, Options, render_document
from tests.formats.samples import PO, XLIFF2, XLIFF12, tags

LANGS = ("en", "de")
X1 = {"x": "urn:oasis:names:tc:xliff:document:1.2"}
X2 = {"x": "urn:oasis:names:tc:xliff:document:2.0", "mtc": "urn:oasis:names:tc:xliff:matches:2.0"}
# The samples' segments: XLIFF 1.2 units 1 and 5 (3 has a target); XLIFF 2 s1, u3's and
# u4's; PO four texts, of which the second and third are one plural entry.
TARGETS12 = [tags("Der <1>alte Mann</1> sieht den kleinen Hund."), tags("Der <1>Hund</1> schläft.")]
TARGETS2 = [
    tags("Der <1>alte Mann</1> sieht den kleinen Hund."),
    tags("Wir haben <1/> ein neues Auto gekauft."),
    tags("Der <1>kleine Hund</1> schläft."),
]
TARGETS_PO = [
    "Der alte Mann sieht %s den kleinen Hund.",
    "%(count)d Hund schläft.",
    "%(count)d Hunde schlafen.",
    "Wir haben {name} ein neues Auto gekauft.",
]


def xml(data: bytes) -> etree._Element:
    return etree.fromstring(data)  # raises on output that is not well-formed


def test_xliff12_alt_trans_carries_the_score_and_the_state_follows_review():
    out = render_document(
        "xliff", XLIFF12, TARGETS12, Options(), LANGS, marks=[Mark(0.834, False), Mark(0.2, True)]
    )
    root = xml(out)
    kept = root.find(".//x:trans-unit[@id='1']", X1)
    assert kept.find("x:target", X1).get("state") == "translated"
    alt = kept.find("x:alt-trans", X1)
    assert (alt.get("origin"), alt.get("match-quality")) == ("stapel", "83.4")
    assert "".join(alt.find("x:target", X1).itertext()) == "Der alte Mann sieht den kleinen Hund."
    # the alt-trans follows the target, before the unit's note (the schema's order)
    assert [etree.QName(e).localname for e in kept] == ["source", "target", "alt-trans"]
    review = root.find(".//x:trans-unit[@id='5']", X1)
    assert review.find("x:target", X1).get("state") == "needs-review-translation"
    # its target is not the scored translation (empty, or the source): no candidate
    assert [etree.QName(e).localname for e in review] == ["source", "target", "note"]


def test_xliff12_without_routing_keeps_the_machine_translation_state():
    out = render_document(
        "xliff", XLIFF12, TARGETS12, Options(), LANGS, marks=[Mark(0.9), Mark(None)]
    )
    root = xml(out)
    states = [t.get("state") for t in root.iterfind(".//x:trans-unit/x:target", X1)]
    assert states == ["needs-review-translation", None, "needs-review-translation"]
    assert len(root.findall(".//x:alt-trans", X1)) == 1  # the unscored segment has none


def test_xliff12_rerun_replaces_its_own_alt_trans():
    once = render_document("xliff", XLIFF12, TARGETS12, Options(), LANGS, marks=[Mark(0.5)] * 2)
    again = [TARGETS12[0], "Wir haben ein neues Auto gekauft.", TARGETS12[1]]  # unit 3 too
    twice = render_document(
        "xliff", once, again, Options(overwrite_targets=True), LANGS, marks=[Mark(0.7)] * 3
    )
    qualities = [a.get("match-quality") for a in xml(twice).iterfind(".//x:alt-trans", X1)]
    assert qualities == ["70.0", "70.0", "70.0"]


def test_xliff2_match_refers_to_its_segment_and_review_is_a_substate():
    out = render_document(
        "xliff",
        XLIFF2,
        TARGETS2,
        Options(),
        LANGS,
        marks=[Mark(0.9, False), Mark(0.8, False), Mark(0.25, True)],
    )
    root = xml(out)
    first = root.find(".//x:unit[@id='u1']", X2)
    match = first.find("mtc:matches/mtc:match", X2)
    assert match.get("ref") == "#s1"
    assert (match.get("type"), match.get("origin"), match.get("matchQuality")) == (
        "mt",
        "stapel",
        "90.0",
    )
    assert "".join(match.find("x:target", X2).itertext()) == "Der alte Mann sieht den kleinen Hund."
    assert etree.QName(first[0]).localname == "matches"  # modules come first in a unit
    assert first.find("x:segment[@id='s1']", X2).get("subState") is None
    last = root.find(".//x:unit[@id='u4']", X2)
    segment = last.find("x:segment", X2)
    assert (segment.get("state"), segment.get("subState")) == ("translated", "stapel:needs-review")
    assert last.find("mtc:matches", X2) is None  # to review: its target is not the scored one
    middle = root.find(".//x:unit[@id='u3']", X2)
    ref = middle.find("mtc:matches/mtc:match", X2).get("ref")
    assert ref == "#" + middle.find("x:segment", X2).get("id")  # given one where it had none


def test_xliff2_rerun_sending_a_segment_to_review_drops_its_candidate():
    once = render_document(
        "xliff", XLIFF2, TARGETS2, Options(), LANGS, marks=[Mark(0.9, False)] * 3
    )
    assert xml(once).find(".//x:unit[@id='u1']/mtc:matches/mtc:match", X2) is not None
    twice = render_document(
        "xliff",
        once,
        ["", *TARGETS2[1:]],
        Options(overwrite_targets=True),
        LANGS,
        marks=[Mark(0.1, True), Mark(0.9, False), Mark(0.8, False)],
    )
    root = xml(twice)
    assert root.find(".//x:unit[@id='u1']/mtc:matches", X2) is None  # none left: none at all
    qualities = [m.get("matchQuality") for m in root.iterfind(".//mtc:match", X2)]
    assert qualities == ["90.0", "80.0"]


def test_a_segment_left_empty_for_review_offers_no_candidate():
    out = render_document(
        "xliff",
        XLIFF2,
        ["", *TARGETS2[1:]],
        Options(),
        LANGS,
        marks=[Mark(0.1, True), Mark(0.8, False), Mark(0.8, False)],
    )
    root = xml(out)
    first = root.find(".//x:unit[@id='u1']", X2)
    assert first.find("mtc:matches", X2) is None
    assert first.find("x:segment", X2).get("subState") == "stapel:needs-review"
    assert root.find(".//x:unit[@id='u4']/mtc:matches/mtc:match", X2) is not None


def test_po_score_comment_and_fuzzy_for_review_only():
    marks = [Mark(0.834, False), Mark(0.9, False), Mark(0.4, True), Mark(None, None)]
    out = render_document("po", PO, TARGETS_PO, Options(mark_fuzzy=False), LANGS, marks=marks)
    po = polib.pofile(out.decode())
    first, plural, third = (
        po.find(m)
        for m in (
            "The old man sees %s the small dog.",
            "%(count)d dog sleeps.",
            "We have bought {name} a new car.",
        )
    )
    assert first.tcomment == "stapel-score: 0.83" and "fuzzy" not in first.flags
    assert plural.tcomment == "stapel-score: 0.40"  # the lowest of its two texts
    assert "fuzzy" in plural.flags and "python-format" in plural.flags
    assert third.tcomment == "" and "fuzzy" not in third.flags
    # entries that did not change keep their original lines
    assert b'#~ msgid "The old dog."\n' in out and b"# German translation of the demo.\n" in out


def test_po_rerun_replaces_the_score_comment_and_keeps_a_translators_own():
    own = PO.replace(b"#: app.py:10\n", b"# Ask Kim first.\n#: app.py:10\n")
    once = render_document("po", own, TARGETS_PO, Options(), LANGS, marks=[Mark(0.5)] * 4)
    twice = render_document(
        "po", once, TARGETS_PO, Options(overwrite_targets=True), LANGS, marks=[Mark(0.75)] * 4
    )
    entry = polib.pofile(twice.decode()).find("The old man sees %s the small dog.")
    assert entry.tcomment == "Ask Kim first.\nstapel-score: 0.75"
    assert "fuzzy" in entry.flags  # mark_fuzzy (the default) still marks every entry


@pytest.mark.parametrize(
    ("data", "targets"), [(XLIFF12, TARGETS12), (XLIFF2, TARGETS2), (PO, TARGETS_PO)]
)
def test_empty_marks_change_nothing(data, targets):
    plain = render_document("po" if data is PO else "xliff", data, targets, Options(), LANGS)
    marked = render_document(
        "po" if data is PO else "xliff",
        data,
        targets,
        Options(),
        LANGS,
        marks=[Mark()] * len(targets),
    )
    assert marked == plain
