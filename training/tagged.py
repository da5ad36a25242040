"""A held-out set of sentences with inline tags around phrases, and how well tags land.

The grammar renders a marked noun phrase with tag markers in both languages
(`grammar.marked`), so each tag's reference position in the translation is known: the
whole phrase, its adjective, its noun, or a standalone tag right before it. The set is
drawn from the held-out side of the corpus split (never trained on).

    python -m training.tagged evaluate --pair en-de      # the share of tags on the right words
    python -m training.tagged choose --pair en-de        # pick alignment layer/heads, write them

`choose` scores every alignment layer and head count on sentences from the training
side (so the held-out figure stays unbiased) and writes the best into model.bin; the
translations do not change (the alignment settings only select which attention
`return_attention` reports).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import ctranslate2
import sentencepiece as spm

from stapel.formats import align, inline
from training import modelbin
from training.corpus import is_held_out
from training.grammar import (
    CONTRACTIONS,
    MARK_CLOSE,
    MARK_OPEN,
    MARK_POINT,
    NP,
    Clause,
    SentenceGenerator,
    det_de,
)

MODELS = Path(__file__).resolve().parents[1] / "models"
PARTS = ("np", "np", "noun", "adj", "before")
RAW = re.compile(f" ?([{MARK_OPEN}{MARK_CLOSE}{MARK_POINT}])([0-9]+) ?")


class TaggedGenerator(SentenceGenerator):
    """Sentences whose noun phrases are marked at random, up to three tags a sentence."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.tags = random.Random(seed + 1)
        self.count = 0

    def pair(self) -> tuple[str, str]:
        self.count = 0
        return super().pair()

    def clause(self, **kwargs) -> Clause | None:
        c = super().clause(**kwargs)
        if c is not None:
            for np, in_pp in _candidates(c):
                if self.count < 3 and self.tags.random() < 0.4:
                    self._mark(np, in_pp, c)
        return c

    def _mark(self, np: NP, in_pp: bool, c: Clause) -> None:
        part = self.tags.choice(PARTS)
        if part == "adj" and np.adj is None:
            part = "noun"
        if part in ("np", "before") and in_pp and _contracts(c):
            part = "noun"
        self.count += 1
        np.mark, np.mark_part = self.count, part


def _candidates(c: Clause) -> list[tuple[NP, bool]]:
    nps = [(np, False) for np in (c.subj, c.dat, c.acc) if np is not None and np.noun]
    if c.pp is not None and c.pp.np.noun:
        nps.append((c.pp.np, True))
    return nps


def _contracts(c: Clause) -> bool:
    """Whether German fuses the PP's preposition and article (zum, im): no tag between."""
    pp = c.pp
    if pp is None or pp.np.det != "def":
        return False
    article, _ = det_de(pp.np.det, pp.np.noun, pp.np.plural, pp.case)
    return (pp.de, article) in CONTRACTIONS


def to_inline(raw: str) -> str:
    """Turn a sentence rendered with grammar markers into Stapel's inline-code form."""

    def repl(match: re.Match) -> str:
        kind = {MARK_OPEN: "open", MARK_CLOSE: "close", MARK_POINT: "point"}[match.group(1)]
        code = inline.marker(kind, int(match.group(2)))
        text = match.group(0)
        lead = " " if text.startswith(" ") and kind != "close" else ""
        tail = " " if text.endswith(" ") and kind != "open" else ""
        return lead + code + tail

    text = RAW.sub(repl, raw)
    plain = inline.strip(text)
    first = next((i for i, ch in enumerate(text) if ch.isalpha()), None)
    if first is not None and plain.lstrip()[:1].islower():
        text = text[:first] + text[first].upper() + text[first + 1 :]
    return text


def tagged_pairs(n: int, *, held_out: bool = True, seed: int = 0) -> list[tuple[str, str]]:
    """Return n (English, German) pairs in inline-code form, each with at least one tag."""
    gen = TaggedGenerator(seed)
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    while len(out) < n:
        en_raw, de_raw = gen.pair()
        en, de = to_inline(en_raw), to_inline(de_raw)
        plain = inline.strip(en)
        if not inline.has_codes(en) or plain in seen or is_held_out(plain) != held_out:
            continue
        seen.add(plain)
        out.append((en, de))
    return out


@dataclass
class Score:
    tags: int = 0
    right: int = 0
    sentences: int = 0
    translated_exactly: int = 0
    tags_in_exact: int = 0
    right_in_exact: int = 0

    def as_json(self) -> dict:
        return {
            **self.__dict__,
            "share": round(self.right / max(self.tags, 1), 4),
            "share_in_exact": round(self.right_in_exact / max(self.tags_in_exact, 1), 4),
        }


def positions(text: str) -> dict[tuple[int, str], int]:
    """Where each marker sits, counted in words of the plain text before it."""
    plain, codes = inline.split(text)
    return {(c.id, c.kind): len(align.words(plain[: c.offset])) for c in codes}


def inside(text: str) -> dict[int, str]:
    """The plain words inside each paired tag."""
    plain, codes = inline.split(text)
    opens = {c.id: c.offset for c in codes if c.kind == "open"}
    return {c.id: plain[opens[c.id] : c.offset] for c in codes if c.kind == "close"}


def score(results: list[tuple[str, str]]) -> Score:
    """Count tags whose words are exactly the reference's (output, reference) pairs."""
    s = Score()
    for out, ref in results:
        s.sentences += 1
        exact = inline.strip(out) == inline.strip(ref)
        s.translated_exactly += exact
        want, got = positions(ref), positions(out)
        ids = {i for i, _ in want}
        for i in ids:
            keys = [k for k in want if k[0] == i]
            if exact:
                ok = all(got.get(k) == want[k] for k in keys)
            else:
                ok = (i, "open") in want and inside(out).get(i) == inside(ref).get(i)
            s.tags += 1
            s.right += ok
            if exact:
                s.tags_in_exact += 1
                s.right_in_exact += ok
    return s


def translate_tagged(model_dir: Path, sources: list[str]) -> list[str]:
    """Translate tagged sources the way the worker does: plain text, then place the tags."""
    sp_src = spm.SentencePieceProcessor(model_file=str(model_dir / "source.spm"))
    sp_tgt = spm.SentencePieceProcessor(model_file=str(model_dir / "target.spm"))
    translator = ctranslate2.Translator(str(model_dir), device="cpu", compute_type="int8")
    plains = [inline.strip(s) for s in sources]
    pieces = sp_src.encode(plains, out_type=str)
    results = translator.translate_batch(
        [p + ["</s>"] for p in pieces], beam_size=1, return_attention=True, max_batch_size=64
    )
    out = []
    for source, src, result in zip(sources, pieces, results, strict=True):
        hyp = result.hypotheses[0]
        aligned = align.Aligned(sp_tgt.decode(hyp), src, hyp, result.attention[0])
        out.append(align.place(source, aligned))
    return out


def evaluate(pair: str, n: int, held_out: bool = True, model_dir: Path | None = None) -> Score:
    """Score tag placement on n tagged sentences of the pair."""
    english_first = pair == "en-de"
    pairs = tagged_pairs(n, held_out=held_out)
    sources = [e if english_first else d for e, d in pairs]
    references = [d if english_first else e for e, d in pairs]
    outputs = translate_tagged(model_dir or MODELS / pair, sources)
    return score(list(zip(outputs, references, strict=True)))


def choose(pair: str, n: int) -> dict:
    """Score every alignment layer and head count on training-side sentences; keep the best."""
    model_dir = MODELS / pair
    layers = modelbin.decoder_layers(model_dir)
    heads = modelbin.read_scalar(model_dir / "model.bin", "decoder/num_heads")
    table = {}
    with tempfile.TemporaryDirectory() as tmp:
        trial = Path(tmp) / pair
        shutil.copytree(model_dir, trial)
        for layer in range(layers):
            for count in range(1, heads + 1):
                modelbin.set_alignment(trial, layer, count)
                table[(layer, count)] = evaluate(pair, n, held_out=False, model_dir=trial)
    best = max(table, key=lambda k: (table[k].right, -k[1]))
    modelbin.set_alignment(model_dir, *best)
    return {
        "pair": pair,
        "alignment_layer": best[0],
        "alignment_heads": best[1],
        "scores": {f"layer {k[0]}, heads {k[1]}": v.as_json()["share"] for k, v in table.items()},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m training.tagged")
    parser.add_argument("command", choices=("evaluate", "choose"))
    parser.add_argument("--pair", default="en-de", choices=("en-de", "de-en"))
    parser.add_argument("--n", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.command == "evaluate":
        report = {"pair": args.pair, **evaluate(args.pair, args.n).as_json()}
    else:
        report = choose(args.pair, args.n)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
