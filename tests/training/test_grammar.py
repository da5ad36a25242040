"""The grammar renders correct German and English, deterministically and unambiguously."""

from __future__ import annotations

import pytest

from training import lexicon as lx
from training.corpus import build_corpus, is_held_out
from training.grammar import (
    NP,
    PP,
    Clause,
    Rel,
    SentenceGenerator,
    clause_de,
    clause_en,
    finish,
    present_de,
)

NOUNS = {n.de: n for n in lx.parse_nouns()}
VERBS = {(v.prefix + v.inf, v.frame): v for v in lx.parse_verbs()}
ADJS = {a.de: a for a in lx.parse_adjectives()}


def verb(inf: str, frame: str = "acc"):
    """Look up a verb by infinitive and frame."""
    return VERBS[(inf, frame)]


def both(c: Clause, order: str = "main", end: str = ".") -> tuple[str, str]:
    """Render a clause as an (English, German) sentence."""
    en_order = "question" if order == "question" else "decl"
    return finish(clause_en(c, en_order), end), finish(clause_de(c, order), end)


@pytest.mark.parametrize(
    "inf,third,idx,form",
    [
        ("lesen", "liest", 1, "liest"),
        ("lesen", "liest", 0, "lese"),
        ("arbeiten", "arbeitet", 1, "arbeitest"),
        ("warten", None, 2, "wartet"),
        ("fahren", "fährt", 1, "fährst"),
        ("tanzen", None, 1, "tanzt"),
        ("füttern", None, 0, "füttere"),
        ("füttern", None, 2, "füttert"),
        ("laden", "lädt", 1, "lädst"),
        ("öffnen", "öffnet", 1, "öffnest"),
        ("bereiten", None, 2, "bereitet"),
        ("sein", None, 5, "sind"),
        ("müssen", None, 1, "musst"),
        ("wissen", None, 2, "weiß"),
    ],
)
def test_present_tense(inf: str, third: str | None, idx: int, form: str) -> None:
    assert present_de(inf, third, idx) == form


def test_perfect_negation_with_kein_and_mixed_adjective() -> None:
    c = Clause(
        NP(NOUNS["Mann"]),
        verb("lesen"),
        tense="perf",
        neg=True,
        acc=NP(NOUNS["Buch"], det="kein", adj=ADJS["alt"]),
    )
    assert both(c) == ("The man has not read an old book.", "Der Mann hat kein altes Buch gelesen.")


def test_dative_plural_weak_adjective_and_weak_noun() -> None:
    c = Clause(
        NP(NOUNS["Frau"], plural=True),
        verb("geben", "ditr"),
        dat=NP(NOUNS["Junge"], adj=ADJS["klein"]),
        acc=NP(NOUNS["Apfel"], det="num:drei", plural=True),
    )
    assert both(c) == (
        "The women give the small boy three apples.",
        "Die Frauen geben dem kleinen Jungen drei Äpfel.",
    )


def test_contractions_and_sein_perfect() -> None:
    c = Clause(
        NP(pron="2s"),
        verb("gehen", "dir"),
        tense="perf",
        pp=PP("zu", "dat", "to", NP(NOUNS["Bahnhof"])),
    )
    assert both(c) == ("You have gone to the station.", "Du bist zum Bahnhof gegangen.")
    c = Clause(NP(NOUNS["Kind"]), None, pp=PP("in", "dat", "at", NP(NOUNS["Kino"])))
    assert both(c, "question", "?") == ("Is the child at the cinema?", "Ist das Kind im Kino?")


def test_separable_verb_in_main_and_subordinate_clause() -> None:
    c = Clause(NP(pron="1s"), verb("anrufen"), acc=NP(NOUNS["Junge"], det="poss:mein"))
    assert both(c) == ("I call my boy.", "Ich rufe meinen Jungen an.")
    assert finish(["dass"] + clause_de(c, "sub"), ".") == "Dass ich meinen Jungen anrufe."


def test_modal_negation_and_question() -> None:
    c = Clause(
        NP(NOUNS["Katze"]),
        verb("essen"),
        modal="müssen",
        neg=True,
        acc=NP(NOUNS["Wurst"], det="dies"),
    )
    assert both(c) == (
        "The cat does not have to eat this sausage.",
        "Die Katze muss diese Wurst nicht essen.",
    )


def test_relative_clause_in_dative_and_pronoun_before_noun_subject() -> None:
    helper = Clause(NP(NOUNS["Frau"]), verb("helfen", "dat"), dat=NP(NOUNS["Mann"]))
    subj = NP(NOUNS["Mann"], rel=Rel("dat", helper))
    c = Clause(subj, verb("schlafen", "intr"))
    assert both(c) == (
        "The man whom the woman helps sleeps.",
        "Der Mann, dem die Frau hilft, schläft.",
    )
    c = Clause(NP(NOUNS["Lehrer"]), verb("besuchen"), acc=NP(pron="1s"))
    assert finish(clause_de(c, "main", front="heute"), ".") == "Heute besucht mich der Lehrer."


def test_corpus_is_seeded_and_split_by_hash() -> None:
    a, b = build_corpus(400, 10, seed=0), build_corpus(400, 10, seed=0)
    assert a == b
    assert build_corpus(400, 10, seed=1).train != a.train
    train_en = {e for e, _ in a.train}
    assert all(is_held_out(e) and e not in train_en for e, _ in a.test)
    assert not any(is_held_out(e) for e in train_en)


def test_translations_are_functions_both_ways() -> None:
    gen = SentenceGenerator(5)
    en_to_de: dict[str, str] = {}
    de_to_en: dict[str, str] = {}
    for _ in range(20000):
        en, de = gen.pair()
        assert en_to_de.setdefault(en, de) == de
        assert de_to_en.setdefault(de, en) == en
    assert len(en_to_de) > 15000
