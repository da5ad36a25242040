"""Language detection, restricted to and ranked among the model root's languages."""

from __future__ import annotations

import pytest

from stapel import detect

GERMAN = "Der alte Mann sieht den kleinen Hund und die Frau liest ein Buch."
ENGLISH = "The old man sees the small dog and the woman reads a book."
FRENCH = "Le vieil homme voit le petit chien et la femme lit un livre."


@pytest.mark.parametrize(
    ("text", "languages", "best"),
    [
        (GERMAN, ["en", "de"], "de"),
        (ENGLISH, ["en", "de"], "en"),
        (FRENCH, ["en", "de", "fr"], "fr"),
        (FRENCH, ["en", "de"], None),  # only ranked among those: some served language wins
        (GERMAN, ["de_AT", "en"], "de_AT"),  # model codes with a region keep their code
        ("שלום לכולם, מה שלומכם היום?", ["iw", "en"], "iw"),  # py3langid knows it as he
    ],
)
def test_best_is_among_the_languages_given(text, languages, best):
    found, confidence = detect.best(text, languages)
    assert found in languages and 0 <= confidence <= 1
    if best is not None:
        assert found == best and confidence > 0.9


def test_rank_orders_every_language_and_sums_to_one():
    ranked = detect.rank(ENGLISH, ["de", "fr", "en"])
    assert ranked[0][0] == "en" and len(ranked) == 3
    assert sum(c for _, c in ranked) == pytest.approx(1.0, abs=1e-3)
    assert [c for _, c in ranked] == sorted((c for _, c in ranked), reverse=True)


def test_one_language_is_certain_and_unknown_ones_are_left_out():
    assert detect.rank("anything", ["en"]) == [("en", 1.0)]
    assert detect.detectable(["en", "xx", "tlh"]) == ["en"]
    assert detect.rank(GERMAN, ["xx"]) == [] and detect.best(GERMAN, ["xx"]) is None
