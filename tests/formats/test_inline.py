"""Inline codes: markers in, plain text and offsets out, and back; alignment places them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stapel.formats import align, inline
from tests.formats.samples import tags


@pytest.mark.parametrize(
    ("tagged", "plain"),
    [
        ("The <1>old man</1> sees.", "The old man sees."),
        ("Delete <1/> files", "Delete files"),
        ("a <1/> <2/> b", "a b"),
        ("<1/> has left", " has left"),
        ("x<1/>y", "xy"),
        ("end <1/>", "end "),
        ("no codes at all", "no codes at all"),
    ],
)
def test_split_and_join_are_inverse(tagged, plain):
    text = tags(tagged)
    got, codes = inline.split(text)
    assert got == plain
    assert inline.join(got, codes) == text
    assert inline.readable(text) == tagged


def test_stray_marker_characters_are_dropped():
    assert inline.strip("a\ufdd0b\ufdd3c") == "abc"


def test_crossing_pairs_are_not_pairs():
    codes = inline.split(tags("<1>a <2>b</1> c</2>"))[1]
    assert set(inline.pairs(codes)) == {1}


def aligned(source: str, target: str, links: dict[int, int]) -> align.Aligned:
    """An alignment where target word j attends only to source word links[j]."""
    src, tgt = source.split(), target.split()
    attention = [
        [1.0 if links.get(j) == i else 0.0 for i in range(len(src))] for j in range(len(tgt))
    ]
    return align.Aligned(
        target, ["\u2581" + w for w in src], ["\u2581" + w for w in tgt], attention
    )


def test_a_pair_spans_the_target_words_of_its_source_words():
    a = aligned("the old man sees", "der alte Mann sieht", {0: 0, 1: 1, 2: 2, 3: 3})
    assert align.place(tags("the <1>old man</1> sees"), a) == tags("der <1>alte Mann</1> sieht")


def test_reordered_words_carry_their_codes():
    a = aligned("I have bought a car", "ich habe ein Auto gekauft", {0: 0, 1: 1, 2: 3, 3: 4, 4: 2})
    out = align.place(tags("I have <1>bought</1> <2/> a car"), a)
    assert out == tags("ich habe <2/> ein Auto <1>gekauft</1>")


def test_a_code_with_no_aligned_word_stays_at_the_nearest_end():
    a = aligned("one two three four", "eins zwei", {})
    out = align.place(tags("<1>one</1> two three <2/>four"), a)
    assert inline.readable(out) == "<1></1>eins zwei <2/>"


def test_crossing_alignments_still_nest():
    a = aligned("a b c d", "w x y z", {0: 1, 1: 3, 2: 0, 3: 2})
    out = align.place(tags("<1>a b</1> <2>c d</2>"), a)
    assert _nests(out)


def _nests(text: str) -> bool:
    stack = []
    for code in inline.split(text)[1]:
        if code.kind == "open":
            stack.append(code.id)
        elif code.kind == "close" and (not stack or stack.pop() != code.id):
            return False
    return not stack


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=6),
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=3),
    st.lists(st.integers(0, 6), max_size=3),
    st.integers(1, 7),
)
def test_every_code_comes_back_once_and_nested(links, spans, points, length):
    words = [f"w{i}" for i in range(6)]
    parts = [[] for _ in range(7)]  # markers before word i
    n = 0
    for a, b in spans:  # nested or disjoint by construction: sorted, non-crossing
        lo, hi = sorted((a, b))
        n += 1
        parts[lo].append(inline.marker("open", n))
        parts[hi + 1].insert(0, inline.marker("close", n))
    for p in points:
        n += 1
        parts[p].append(inline.marker("point", n))
    source = " ".join("".join(parts[i]) + words[i] for i in range(6)) + "".join(parts[6])
    if not _nests(source):
        return
    target = " ".join(f"t{j}" for j in range(length))
    out = align.place(source, aligned(inline.strip(source), target, dict(enumerate(links))))
    assert sorted(m.group(0) for m in inline.MARKER.finditer(out)) == sorted(
        m.group(0) for m in inline.MARKER.finditer(source)
    )
    assert _nests(out)
    assert inline.strip(out).split() == target.split()


def test_half_of_a_pair_never_lands_inside_a_span():
    # "w" links to no target word of its own; its best one, T2, is inside pair 1's span.
    # The open of pair 2 (closed in a later segment) must not cross pair 1.
    attention = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0.3, 0.6, 0.1]]
    a = align.Aligned(
        "T0 T1 T2",
        ["\u2581x", "\u2581y", "\u2581z", "\u2581w"],
        ["\u2581T0", "\u2581T1", "\u2581T2"],
        attention,
    )
    source = "x " + tags("<1>y z</1> ") + inline.marker("open", 2) + "w"
    out = align.place(source, a)
    assert inline.readable(out) == "T0 <1>T1 T2</1> <2>"


@pytest.mark.parametrize(
    ("source", "placed"),
    [
        ("Para<1/>graph", "<1/>Absatz"),
        ("Paragr<1/>aph", "Absatz<1/>"),
        ("Para<1>gr</1>aph", "<1>Absatz</1>"),
        ("Normal para<7></7>graph", "Normaler <7></7>Absatz"),
        ("<1>Para</1><2>graph</2>", "<1>Absatz</1><2></2>"),
    ],
)
def test_a_code_inside_a_word_goes_with_that_word(source, placed):
    src, tgt = inline.strip(tags(source)), "Normaler Absatz" if "Normal" in source else "Absatz"
    links = {0: 0, 1: 1} if "Normal" in source else {0: 0}
    assert inline.readable(align.place(tags(source), aligned(src, tgt, links))) == placed


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=3),
    st.lists(st.integers(0, 12), max_size=3),
)
def test_codes_anywhere_in_words_come_back_once_and_nested(links, spans, points):
    letters = list("abc def ghij")  # markers go before any of these characters
    parts: list[list[str]] = [[] for _ in range(len(letters) + 1)]
    n = 0
    for a, b in spans:
        lo, hi = sorted((a, b))
        n += 1
        parts[lo].append(inline.marker("open", n))
        parts[hi + 1].insert(0, inline.marker("close", n))
    for p in points:
        n += 1
        parts[p].append(inline.marker("point", n))
    source = "".join("".join(parts[i]) + c for i, c in enumerate(letters)) + "".join(parts[-1])
    if not _nests(source):
        return
    plain = inline.strip(source)
    target = " ".join(f"t{j}" for j in range(len(links)))
    a = align.Aligned(
        target,
        ["\u2581" + w for w in plain.split()],
        ["\u2581" + w for w in target.split()],
        [
            [1.0 if links[j] == i else 0.0 for i in range(len(plain.split()))]
            for j in range(len(links))
        ],
    )
    out = align.place(source, a)
    assert inline.same_codes(source, out)
    assert inline.strip(out).split() == target.split()


def test_a_placement_that_fails_falls_back_to_the_edges():
    # Attention that names no piece of the text: nothing to align, the codes stay whole.
    broken = align.Aligned("T0 T1", ["\u2581x"], ["\u2581T0"], [[float("nan")] * 3] * 5)
    out = align.place(tags("a<1>b c</1> d<2/>"), broken)
    assert inline.same_codes(tags("a<1>b c</1> d<2/>"), out)
