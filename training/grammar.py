"""A seeded grammar that writes parallel English-German sentences.

Every sentence is built once as a structure and rendered into both languages, so the
German is the reference translation of the English and vice versa.  The grammar
avoids constructions whose translation would be ambiguous (for example German 'sie'
as an accusative object, which could be 'her' or 'them').
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from training import lexicon as lx
from training.lexicon import Adjective, Noun, Verb

CASES = ("nom", "acc", "dat")
GENDER_INDEX = {"m": 0, "f": 1, "n": 2}
DEF_ARTICLE = {
    "nom": ("der", "die", "das", "die"),
    "acc": ("den", "die", "das", "die"),
    "dat": ("dem", "der", "dem", "den"),
}
EIN_ENDING = {
    "nom": ("", "e", "", "e"),
    "acc": ("en", "e", "", "e"),
    "dat": ("em", "er", "em", "en"),
}
DIES_ENDING = {
    "nom": ("er", "e", "es", "e"),
    "acc": ("en", "e", "es", "e"),
    "dat": ("em", "er", "em", "en"),
}
WEAK = {
    "nom": ("e", "e", "e", "en"),
    "acc": ("en", "e", "e", "en"),
    "dat": ("en", "en", "en", "en"),
}
MIXED = {
    "nom": ("er", "e", "es", "en"),
    "acc": ("en", "e", "es", "en"),
    "dat": ("en", "en", "en", "en"),
}
STRONG_PLURAL = {"nom": "e", "acc": "e", "dat": "en"}
CONTRACTIONS = {
    ("an", "dem"): "am",
    ("in", "dem"): "im",
    ("zu", "dem"): "zum",
    ("zu", "der"): "zur",
    ("in", "das"): "ins",
    ("an", "das"): "ans",
}
REL_PRONOUN = {
    "nom": ("der", "die", "das", "die"),
    "acc": ("den", "die", "das", "die"),
    "dat": ("dem", "der", "dem", "denen"),
}
THING_TAGS = set("trwsokxcbeyvg")
AN_EXCEPTIONS = ("university", "universities")
MARK_OPEN, MARK_CLOSE, MARK_POINT = "\x01", "\x02", "\x03"
"""Tag markers a marked phrase is rendered with (training/tagged.py turns them into tags)."""


@dataclass
class NP:
    """A noun phrase: a pronoun or a determiner, an optional adjective and a noun."""

    noun: Noun | None = None
    pron: str | None = None
    det: str = "def"
    plural: bool = False
    adj: Adjective | None = None
    rel: Rel | None = None
    mark: int = 0
    """Inline-tag number around part of this phrase (training/tagged.py); 0: none."""
    mark_part: str = "np"
    """What the tag covers: the whole phrase ("np"), its "adj" or its "noun"; "before":
    a standalone tag right before the phrase."""

    @property
    def person(self) -> int:
        """Grammatical person."""
        return lx.PRONOUNS[self.pron][5] if self.pron else 3

    @property
    def is_plural(self) -> bool:
        """Grammatical number."""
        return lx.PRONOUNS[self.pron][6] if self.pron else self.plural


@dataclass
class PP:
    """A prepositional phrase with German preposition and case and English preposition."""

    de: str
    case: str
    en: str
    np: NP


@dataclass
class Clause:
    """One clause: subject, verb, tense, modal, negation and complements."""

    subj: NP
    verb: Verb | None
    tense: str = "pres"
    modal: str | None = None
    neg: bool = False
    dat: NP | None = None
    acc: NP | None = None
    pp: PP | None = None
    pred: Adjective | None = None


@dataclass
class Rel:
    """A relative clause attached to a noun phrase; role is nom, acc or dat."""

    role: str
    clause: Clause = field(repr=False)


def noun_class(noun: Noun) -> str:
    """Return the adjective class of a noun: P, A, F, D, T or L."""
    for tag, cls in (("P", "P"), ("A", "A"), ("f", "F"), ("d", "D")):
        if tag in noun.tags:
            return cls
    return "T" if THING_TAGS & set(noun.tags) else "L"


def slot(noun: Noun | None, plural: bool) -> int:
    """Return the index into gender/plural tables."""
    return 3 if plural else GENDER_INDEX[noun.gender]


def adj_form(adj: Adjective, ending: str) -> str:
    """Return the attributive adjective with ending (müde + e = müde)."""
    stem = adj.stem
    if stem.endswith("e") and ending.startswith("e"):
        return stem + ending[1:]
    return stem + ending


def det_de(det: str, noun: Noun, plural: bool, case: str) -> tuple[str, str]:
    """Return the German determiner and the adjective declension it demands."""
    i = slot(noun, plural)
    kind, _, word = det.partition(":")
    if kind == "def":
        return DEF_ARTICLE[case][i], "weak"
    if kind == "dies":
        return "dies" + DIES_ENDING[case][i], "weak"
    if kind == "indef" and plural:
        return "", "strong"
    if kind in ("indef", "kein", "poss"):
        stem = {"indef": "ein", "kein": "kein"}.get(kind, word)
        return stem + EIN_ENDING[case][i], "mixed"
    if kind == "num":
        return word, "strong"
    if kind == "viele":
        return ("vielen" if case == "dat" else "viele"), "strong"
    return "", "strong"


def noun_de(noun: Noun, plural: bool, case: str) -> str:
    """Return the German noun form for number and case."""
    if plural:
        form = noun.de_pl
        if case == "dat" and not form.endswith(("n", "s")):
            form += "n"
        return form
    return noun.de if case == "nom" else noun.de_obl


def np_de(np: NP, case: str) -> list[str]:
    """Render a German noun phrase (with its relative clause) in a case."""
    if np.pron:
        nom, acc, dat = lx.PRONOUNS[np.pron][:3]
        return [{"nom": nom, "acc": acc, "dat": dat}[case]]
    det, decl = det_de(np.det, np.noun, np.plural, case)
    words = [det] if det else []
    if np.adj:
        i = slot(np.noun, np.plural)
        if decl == "weak":
            ending = WEAK[case][i]
        elif decl == "mixed":
            ending = MIXED[case][i]
        else:
            ending = STRONG_PLURAL[case]
        words.append(adj_form(np.adj, ending))
    words.append(noun_de(np.noun, np.plural, case))
    words = marked(np, words)
    if np.rel:
        words += [","] + rel_de(np) + [","]
    return words


def marked(np: NP, words: list[str]) -> list[str]:
    """Put np's tag markers (MARK_OPEN/MARK_CLOSE + number) around the part it covers.

    words are the phrase without its relative clause: determiner, adjective, noun.
    """
    if not np.mark:
        return words
    if np.mark_part == "before":
        return [f"{MARK_POINT}{np.mark}", *words]
    start, end = 0, len(words)
    if np.mark_part == "noun":
        start = end - 1
    elif np.mark_part == "adj" and np.adj is not None:
        start, end = end - 2, end - 1
    open_, close = f"{MARK_OPEN}{np.mark}", f"{MARK_CLOSE}{np.mark}"
    return words[:start] + [open_] + words[start:end] + [close] + words[end:]


def rel_de(np: NP) -> list[str]:
    """Render the German relative clause of np, without commas."""
    rel = np.rel
    pron = REL_PRONOUN[rel.role][slot(np.noun, np.plural)]
    return [pron] + clause_de(rel.clause, "sub", rel_pron=(rel.role, pron))[1:]


def pp_de(pp: PP) -> list[str]:
    """Render a German prepositional phrase, contracting preposition and article."""
    words = np_de(pp.np, pp.case)
    key = (pp.de, words[0])
    if pp.np.det == "def" and key in CONTRACTIONS:
        return [CONTRACTIONS[key]] + words[1:]
    return [pp.de] + words


def person_index(np: NP) -> int:
    """Index into six-slot conjugation tables."""
    return np.person - 1 + (3 if np.is_plural else 0)


def present_de(inf: str, third: str | None, idx: int) -> str:
    """Conjugate a German verb in the present tense."""
    if inf in lx.IRREGULAR_PRESENT:
        return lx.IRREGULAR_PRESENT[inf][idx]
    if idx in (3, 5):
        return inf
    stem = inf[:-1] if inf.endswith(("ern", "eln")) else inf[:-2]
    if idx == 0:
        return stem + "e"
    if third:
        changed = third[:-1] if third.endswith("t") else third
    else:
        changed = stem
        if stem.endswith(("t", "d")) or (stem[-1] in "mn" and stem[-2] not in "aeiouäöülrmnh"):
            changed = stem + "e"
    if idx == 1:
        return changed + ("t" if changed.endswith(("s", "ß", "z", "x")) else "st")
    if idx == 2:
        return third or changed + "t"
    return changed + "t"  # ihr


def verb_parts_de(c: Clause) -> tuple[str, list[str]]:
    """Return the finite German verb and the verbs of the right bracket (main order)."""
    idx = person_index(c.subj)
    if c.verb is None:
        return present_de("sein", None, idx), []
    v = c.verb
    if c.modal:
        return present_de(c.modal, None, idx), [v.prefix + v.inf]
    if c.tense == "perf":
        aux = "sein" if v.aux == "s" else "haben"
        return present_de(aux, None, idx), [v.participle]
    finite = present_de(v.inf, v.de_3sg, idx)
    return finite, ([v.prefix] if v.prefix else [])


def middle_de(c: Clause, skip: str | None = None) -> list[str]:
    """Return the German middle field: objects, negation, complements."""
    words: list[str] = []
    if c.dat and skip != "dat":
        words += np_de(c.dat, "dat")
    if c.acc and skip != "acc":
        words += np_de(c.acc, "acc")
    if c.neg and not has_kein(c):
        words.append("nicht")
    if c.pp:
        words += pp_de(c.pp)
    if c.pred:
        words.append(c.pred.de)
    return words


def pronoun_objects(c: Clause) -> int:
    """Count leading pronoun objects, which precede a noun subject after inversion."""
    count = 0
    for np in (c.dat, c.acc):
        if np is None:
            continue
        if not np.pron:
            break
        count += 1
    return count


def has_kein(c: Clause) -> bool:
    """Whether the negation is carried by a 'kein' determiner."""
    return any(np is not None and np.det == "kein" for np in (c.dat, c.acc))


def clause_de(
    c: Clause, order: str, rel_pron: tuple[str, str] | None = None, front: str | None = None
) -> list[str]:
    """Render a German clause in main, question or subordinate ('sub') order."""
    finite, right = verb_parts_de(c)
    subj = [] if rel_pron and rel_pron[0] == "nom" else np_de(c.subj, "nom")
    middle = middle_de(c, rel_pron[0] if rel_pron else None)
    if order == "sub":
        if c.verb is not None and not c.modal and c.tense == "pres" and right:
            tail = [right[0] + finite]
        else:
            tail = right + [finite]
        return ["_"] + subj + middle + tail
    if order == "question" or front:
        head = [front] if front else []
        pron = pronoun_objects(c) if c.subj.pron is None else 0
        return head + [finite] + middle[:pron] + subj + middle[pron:] + right
    return subj + [finite] + middle + right


def article_en(word: str) -> str:
    """Return 'a' or 'an' for the following word."""
    if word.startswith(AN_EXCEPTIONS):
        return "a"
    return "an" if word[0] in "aeiou" else "a"


def np_en(np: NP, case: str) -> list[str]:
    """Render an English noun phrase in subject ('nom') or object form."""
    if np.pron:
        row = lx.PRONOUNS[np.pron]
        return [row[3] if case == "nom" else row[4]]
    noun = np.noun.en_pl if np.plural else np.noun.en
    words = ([np.adj.en] if np.adj else []) + [noun]
    kind, _, word = np.det.partition(":")
    if kind == "def":
        det = "the"
    elif kind == "dies":
        det = "these" if np.plural else "this"
    elif kind in ("indef", "kein"):
        det = "" if np.plural else article_en(words[0])
    elif kind == "poss":
        det = dict(lx.POSSESSIVES)[word]
    elif kind == "num":
        det = dict(lx.NUMBERS)[word]
    elif kind == "viele":
        det = "many"
    else:
        det = ""
    words = marked(np, ([det] if det else []) + words)
    if np.rel:
        words += rel_en(np)
    return words


def rel_en(np: NP) -> list[str]:
    """Render the English relative clause of np."""
    rel = np.rel
    person = noun_class(np.noun) == "P"
    if rel.role == "nom":
        return ["who" if person else "that"] + clause_en(rel.clause, "decl", drop_subject=True)
    word = "whom" if person else "that"
    return [word] + clause_en(rel.clause, "decl", drop=rel.role)


def third_singular(np: NP) -> bool:
    """Whether an English verb takes the -s form with this subject."""
    return np.person == 3 and not np.is_plural


def be_en(np: NP) -> str:
    """Return am/is/are for the subject."""
    if np.pron == "1s":
        return "am"
    return "is" if third_singular(np) else "are"


def verb_group_en(c: Clause, question: bool) -> tuple[list[str], list[str]]:
    """Return English words before and after the subject (after only for questions)."""
    s3 = third_singular(c.subj)
    if c.verb is None:
        be = be_en(c.subj)
        return (
            ([be], ["not"] if c.neg else [])
            if question
            else ([be] + (["not"] if c.neg else []), [])
        )
    base, third, part = c.verb.en
    if c.modal:
        aff, neg, qaux, qrest = lx.MODALS[c.modal]
        i = 0 if s3 else 1
        if question:
            return [qaux[i]], ([qrest] if qrest else []) + [base]
        return [(neg if c.neg else aff)[i], base], []
    if c.tense == "perf":
        aux = "has" if s3 else "have"
        if question:
            return [aux], [part]
        return [aux] + (["not"] if c.neg else []) + [part], []
    do = "does" if s3 else "do"
    if question:
        return [do], [base]
    if c.neg:
        return [do, "not", base], []
    return [third if s3 else base], []


def complements_en(c: Clause, drop: str | None) -> list[str]:
    """Return English objects and complements in order."""
    words: list[str] = []
    if c.dat and drop != "dat":
        words += np_en(c.dat, "obj")
    if c.acc and drop != "acc":
        words += np_en(c.acc, "obj")
    if c.pp:
        words += [c.pp.en] + np_en(c.pp.np, "obj") if c.pp.en else np_en(c.pp.np, "obj")
    if c.pred:
        words.append(c.pred.en)
    return words


def clause_en(
    c: Clause, order: str, drop_subject: bool = False, drop: str | None = None
) -> list[str]:
    """Render an English clause in declarative ('decl') or question order."""
    subj = [] if drop_subject else np_en(c.subj, "nom")
    before, after = verb_group_en(c, order == "question")
    rest = complements_en(c, drop)
    if order == "question":
        return before + subj + after + rest
    return subj + before + rest


def finish(words: list[str], end: str) -> str:
    """Join tokens into a sentence: spacing, commas, capital letter, final mark."""
    out: list[str] = []
    for w in words:
        if w == "_" or w == "":
            continue
        if w == "," and (not out or out[-1] == ","):
            continue
        out.append(w)
    while out and out[-1] == ",":
        out.pop()
    text = " ".join(out).replace(" ,", ",") + end
    return text[0].upper() + text[1:]


class Generator:
    """Draws random sentence structures from the lexicon with a seeded RNG."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.nouns = lx.parse_nouns()
        self.adjs = lx.parse_adjectives()
        self.verbs = lx.parse_verbs()
        self.clause_verbs = [
            Verb(inf, "", third, part, "h", en, "clause", "P", "")
            for inf, third, part, en in lx.parse_clause_verbs()
        ]
        self.by_tag: dict[str, list[Noun]] = {}
        for n in self.nouns:
            for t in n.tags:
                self.by_tag.setdefault(t, []).append(n)

    # ---- noun phrases -------------------------------------------------------------
    def pick_noun(self, tags: str) -> Noun:
        """Pick a noun carrying one of the tags, tags weighted equally."""
        pools = [self.by_tag[t] for t in tags if t in self.by_tag]
        return self.rng.choice(self.rng.choice(pools))

    def adjective(self, noun: Noun) -> Adjective | None:
        """Maybe pick an adjective that fits the noun."""
        if self.rng.random() > 0.25:
            return None
        cls = noun_class(noun)
        return self.rng.choice([a for a in self.adjs if cls in a.classes])

    def np(self, tags: str, *, pron_ok: str = "", place: bool = False) -> NP:
        """Draw a noun phrase from nouns with tags, or a pronoun from pron_ok."""
        r = self.rng
        if pron_ok and r.random() < 0.3:
            return NP(pron=r.choice(pron_ok.split(",")))
        noun = self.pick_noun(tags)
        adj = self.adjective(noun)
        if place or noun.de_pl is None:
            det = r.choices(["def", "dies", "poss"], [0.8, 0.1, 0.1 if not place else 0])[0]
            if det == "poss":
                det = "poss:" + r.choice(lx.POSSESSIVES)[0]
            return NP(noun, det=det, adj=adj)
        det = r.choices(
            ["def", "indef", "poss", "dies", "num", "bare", "viele"],
            [0.36, 0.2, 0.14, 0.08, 0.1, 0.07, 0.05],
        )[0]
        plural = det in ("num", "bare", "viele") or (
            det in ("def", "poss", "dies") and r.random() < 0.3
        )
        if det == "poss":
            det = "poss:" + r.choice(lx.POSSESSIVES)[0]
        elif det == "num":
            det = "num:" + r.choice(lx.NUMBERS)[0]
        elif det == "bare":
            det = "indef"
        return NP(noun, det=det, plural=plural, adj=adj)

    def subject(self, classes: str, pron: bool = True) -> NP:
        """Draw a subject for a verb whose subjects come from classes."""
        prons = ",".join(lx.PRONOUNS) if pron and "P" in classes else ""
        return self.np(classes, pron_ok=prons)

    # ---- clauses ------------------------------------------------------------------
    def place_pp(self, kind: str, tags: str = "l", swim: bool = False) -> PP:
        """Draw a directional ('dir') or locative ('loc') phrase to a place."""
        np = self.np(tags, place=True)
        d, loc, en_loc = np.noun.place
        if swim:
            return PP("in", "dat", "in", np)
        if kind == "dir":
            return PP(d, "dat" if d == "zu" else "acc", "to", np)
        return PP(loc, "dat", en_loc, np)

    def object_np(self, tags: str, case: str, subj: NP, pron_ok: bool = True) -> NP:
        """Draw an object, with a pronoun where unambiguous and idiomatic."""
        prons = ""
        if "P" in tags and pron_ok:
            keys = ["1s", "2s", "3m", "1p"] + (["3f", "3p"] if case == "dat" else [])
            prons = ",".join(k for k in keys if not same_speaker(k, subj.pron))
        return self.np(tags, pron_ok=prons)

    def clause(
        self,
        *,
        tense_ok: bool = True,
        modal_ok: bool = True,
        neg_ok: bool = True,
        verbs: list[Verb] | None = None,
    ) -> Clause | None:
        """Draw a clause with a random verb, or None when the draw is rejected."""
        r = self.rng
        if verbs is None and r.random() < 0.1:
            return self.copula(neg_ok)
        v = r.choice(verbs or self.verbs)
        c = Clause(self.subject(v.subj), v)
        if v.frame == "acc":
            c.acc = self.object_np(v.obj, "acc", c.subj, not particle_en(v))
        elif v.frame == "dat":
            c.dat = self.object_np(v.obj, "dat", c.subj)
        elif v.frame == "ditr":
            c.dat = self.object_np("PA", "dat", c.subj)
            c.acc = self.np(v.obj)
        elif v.frame == "prep":
            p, case = v.prep
            c.pp = PP(p, case, "", self.object_np(v.obj, case, c.subj))
        elif v.frame == "dir":
            c.pp = self.place_pp("dir")
        elif v.frame == "loc":
            c.pp = self.place_pp("loc", v.obj, swim=v.obj == "a")
        elif v.frame == "intr" and r.random() < 0.4:
            c.pp = self.place_pp("loc")
        roll = r.random()
        if modal_ok and roll < 0.2:
            c.modal = r.choice(list(lx.MODALS))
        elif tense_ok and roll < 0.5:
            c.tense = "perf"
        if neg_ok and r.random() < 0.2 and not self.negate(c):
            return None
        return c

    def copula(self, neg_ok: bool) -> Clause:
        """Draw 'X is ADJ' or 'X is in PLACE'."""
        r = self.rng
        if r.random() < 0.6:
            subj = self.subject("PAtfl")
            cls = "P" if subj.pron else noun_class(subj.noun)
            pred = r.choice([a for a in self.adjs if cls in a.classes])
            c = Clause(subj, None, pred=pred)
        else:
            c = Clause(self.subject("PAt"), None, pp=self.place_pp("loc"))
        c.neg = neg_ok and r.random() < 0.2
        return c

    def negate(self, c: Clause) -> bool:
        """Negate c with 'nicht' or 'kein'; return False when it would be awkward."""
        objs = [np for np in (c.dat, c.acc) if np is not None]
        if any(np.det.startswith(("num", "viele")) for np in objs):
            return False
        if c.dat and c.acc and c.dat.det == "indef" and c.acc.det != "indef":
            return False
        for np in ([c.acc] if c.acc else []) + ([c.dat] if c.dat and not c.acc else []):
            if np.det == "indef":
                np.det = "kein"
        c.neg = True
        return True

    # ---- relative clauses -----------------------------------------------------------
    def relative(self, np: NP) -> bool:
        """Attach a relative clause to np; return False when none fits."""
        r = self.rng
        cls = noun_class(np.noun)
        roles = ["nom", "nom"] if cls in "PA" else []
        roles += ["acc", "acc"] + (["dat"] if cls in "PA" else [])
        role = r.choice(roles) if roles else None
        if role == "nom":
            verbs = [v for v in self.verbs if cls in v.subj]
        elif role == "acc":
            verbs = [v for v in self.verbs if v.frame == "acc" and fits(np.noun, v.obj)]
        elif role == "dat":
            verbs = [
                v
                for v in self.verbs
                if v.frame == "dat" and fits(np.noun, v.obj) and " " not in v.en[0]
            ]
        else:
            return False
        if not verbs:
            return False
        c = self.clause(modal_ok=False, neg_ok=False, verbs=verbs)
        if c is None:
            return False
        if role == "nom":
            c.subj = NP(np.noun, plural=np.plural)
        else:
            setattr(c, role, NP(np.noun, plural=np.plural))
            if (
                role == "acc"
                and cls in "PA"
                and not (np.noun.gender == "m" and not np.plural)
                and not nom_distinct(c.subj)
            ):
                return False
        if c.subj.rel or (c.acc and c.acc.rel):
            return False
        np.rel = Rel(role, c)
        return True


def fits(noun: Noun, tags: str) -> bool:
    """Whether noun carries one of tags."""
    return bool(set(noun.tags) & set(tags))


def nom_distinct(np: NP) -> bool:
    """Whether np's nominative differs visibly from its accusative."""
    if np.pron:
        return np.pron in ("1s", "2s", "3m", "1p")
    return np.noun.gender == "m" and not np.plural


def same_speaker(obj: str, subj: str | None) -> bool:
    """Whether an object pronoun would refer back to a first/second person subject."""
    if subj is None:
        return False
    group = {"1s": "1", "1p": "1", "2s": "2"}
    return group.get(obj) is not None and group.get(obj) == group.get(subj)


def particle_en(v: Verb) -> bool:
    """Whether v's English form has an adverbial particle (pick up, turn off)."""
    return v.en[0].split(" ")[-1] in ("up", "off", "on") and " " in v.en[0]


class SentenceGenerator(Generator):
    """Draws whole sentences: simple, questions, complex and relative clauses."""

    def pair(self) -> tuple[str, str]:
        """Return one (English, German) sentence pair."""
        while True:
            r = self.rng.random()
            if r < 0.42:
                out = self.simple()
            elif r < 0.54:
                out = self.question()
            elif r < 0.67:
                out = self.reported()
            elif r < 0.82:
                out = self.adverbial()
            elif r < 0.88:
                out = self.coordinated()
            else:
                out = self.with_relative()
            if out is not None:
                return out

    def simple(self) -> tuple[str, str] | None:
        """A declarative main clause, sometimes with a fronted time adverb."""
        c = self.clause()
        if c is None:
            return None
        if self.rng.random() < 0.2:
            de_adv, en_adv = self.rng.choice(lx.TIME_ADVERBS)
            return (
                finish([en_adv] + clause_en(c, "decl"), "."),
                finish(clause_de(c, "main", front=de_adv), "."),
            )
        return finish(clause_en(c, "decl"), "."), finish(clause_de(c, "main"), ".")

    def question(self) -> tuple[str, str] | None:
        """A yes/no question or a why/when question."""
        c = self.clause(neg_ok=False)
        if c is None:
            return None
        if self.rng.random() < 0.35:
            de_w, en_w = self.rng.choice(lx.QUESTION_WORDS)
            if en_w == "when" and c.tense == "perf":
                return None
            return (
                finish([en_w] + clause_en(c, "question"), "?"),
                finish(clause_de(c, "main", front=de_w), "?"),
            )
        return finish(clause_en(c, "question"), "?"), finish(clause_de(c, "question"), "?")

    def reported(self) -> tuple[str, str] | None:
        """'X says that ...' or 'X asks whether ...'."""
        r = self.rng
        inner = self.clause()
        if inner is None:
            return None
        if r.random() < 0.2:
            v = Verb(
                "fragen", "", "fragt", "gefragt", "h", ("ask", "asks", "asked"), "clause", "P", ""
            )
            de_conj, en_conj = "ob", "whether"
        else:
            v = r.choice(self.clause_verbs)
            de_conj, en_conj = "dass", "that"
        outer = Clause(self.subject("P"), v)
        if v.inf in ("sagen", "denken", "fragen") and r.random() < 0.3:
            outer.tense = "perf"
        de = clause_de(outer, "main") + [",", de_conj] + clause_de(inner, "sub")
        en = clause_en(outer, "decl") + [en_conj] + clause_en(inner, "decl")
        return finish(en, "."), finish(de, ".")

    def adverbial(self) -> tuple[str, str] | None:
        """A main clause with a because/although/if clause, before or after it."""
        main, sub = self.clause(), self.clause()
        if main is None or sub is None:
            return None
        de_conj, en_conj = self.rng.choice(lx.SUBORDINATORS)
        de_sub = [de_conj] + clause_de(sub, "sub")
        en_sub = [en_conj] + clause_en(sub, "decl")
        if en_conj == "if" and self.rng.random() < 0.5:
            de = de_sub + [","] + clause_de(main, "question")
            return finish(en_sub + [","] + clause_en(main, "decl"), "."), finish(de, ".")
        de = clause_de(main, "main") + [","] + de_sub
        return finish(clause_en(main, "decl") + en_sub, "."), finish(de, ".")

    def coordinated(self) -> tuple[str, str] | None:
        """Two main clauses joined by 'and' or 'but'."""
        a, b = self.clause(), self.clause()
        if a is None or b is None:
            return None
        if self.rng.random() < 0.5:
            de = clause_de(a, "main") + ["und"] + clause_de(b, "main")
            en = clause_en(a, "decl") + ["and"] + clause_en(b, "decl")
        else:
            de = clause_de(a, "main") + [",", "aber"] + clause_de(b, "main")
            en = clause_en(a, "decl") + [",", "but"] + clause_en(b, "decl")
        return finish(en, "."), finish(de, ".")

    def with_relative(self) -> tuple[str, str] | None:
        """A main clause whose subject or final object has a relative clause."""
        c = self.clause()
        if c is None or (c.subj.pron is not None and c.acc is None and c.dat is None):
            return None
        target = None
        last = c.acc or c.dat
        trailing = (
            c.pp
            or c.pred
            or c.modal
            or c.neg
            or c.tense == "perf"
            or (c.verb is not None and c.verb.prefix)
        )
        if last is not None and last.noun and not trailing and self.rng.random() < 0.5:
            target = last
        elif c.subj.noun:
            target = c.subj
        if target is None or not self.relative(target):
            return None
        return finish(clause_en(c, "decl"), "."), finish(clause_de(c, "main"), ".")
