"""How well the segment score separates right translations from wrong ones.

    python -m bench.quality                    # bench/runs/quality.json
    python -m bench.quality --sentences 500    # quicker
    python -m bench.quality --thresholds 0.85 0.87 0.88 --name quality-high

Translates held-out sentences of the demo corpus (the seed-0 grammar of training/, never
seen in training) with the committed demo models at int8 and float32, greedy and with
`</s>` after the source as the worker does, scores each output as the worker does, and
sets the score against two verdicts: *exact* (the output equals the reference after
whitespace normalisation) and *close* (sentence chrF at least CLOSE_CHRF). It reports the
ROC AUC (the chance that a right output scores above a wrong one) and, at each threshold,
the precision and recall of "score under the threshold" as a detector of wrong outputs.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ctranslate2
import sentencepiece as spm

from bench.stamp import ROOT, run_path, write_run
from stapel.scores import THRESHOLDS, from_log_prob

PAIRS = ("en-de", "de-en")
COMPUTE_TYPES = ("int8", "float32")
CLOSE_CHRF = 90.0
"""Sentence chrF at or above which an output counts as close to its reference."""


def normalise(text: str) -> str:
    """Collapse runs of whitespace, so that spacing alone never makes an output wrong."""
    return " ".join(text.split())


def roc_auc(scores: Sequence[float], right: Sequence[bool]) -> float | None:
    """Return the chance that a right output scores above a wrong one (ties count half).

    None when either side is empty: the AUC is undefined without both.
    """
    ranked = sorted(zip(scores, right, strict=True))
    n_right = sum(right)
    n_wrong = len(ranked) - n_right
    if not n_right or not n_wrong:
        return None
    rank_sum = 0.0  # sum of the 1-based ranks of right outputs, ties at their mean rank
    i = 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        mean_rank = (i + 1 + j) / 2
        rank_sum += mean_rank * sum(1 for _, ok in ranked[i:j] if ok)
        i = j
    return (rank_sum - n_right * (n_right + 1) / 2) / (n_right * n_wrong)


@dataclass(frozen=True)
class Detection:
    """What flagging the outputs scored under a threshold catches."""

    threshold: float
    flagged: int
    wrong_flagged: int
    wrong: int

    @property
    def precision(self) -> float | None:
        """Share of flagged outputs that are wrong; None when nothing is flagged."""
        return self.wrong_flagged / self.flagged if self.flagged else None

    @property
    def recall(self) -> float | None:
        """Share of wrong outputs that are flagged; None when none is wrong."""
        return self.wrong_flagged / self.wrong if self.wrong else None


def detection(scores: Sequence[float], right: Sequence[bool], threshold: float) -> Detection:
    """Count what flagging every output scored under `threshold` catches."""
    flagged = [s < threshold for s in scores]
    return Detection(
        threshold=threshold,
        flagged=sum(flagged),
        wrong_flagged=sum(f and not ok for f, ok in zip(flagged, right, strict=True)),
        wrong=sum(not ok for ok in right),
    )


def held_out(n: int) -> list[tuple[str, str]]:
    """The first `n` held-out (English, German) pairs of the seed-0 corpus."""
    from training.build import SEED
    from training.corpus import build_corpus

    return build_corpus(0, n, SEED).test


def translate(
    model_dir: Path, sources: list[str], compute_type: str
) -> tuple[list[str], list[float]]:
    """Translate greedily as the worker does; return the outputs and their scores."""
    sp_src = spm.SentencePieceProcessor(model_file=str(model_dir / "source.spm"))
    sp_tgt = spm.SentencePieceProcessor(model_file=str(model_dir / "target.spm"))
    translator = ctranslate2.Translator(
        str(model_dir), device="cpu", compute_type=compute_type, intra_threads=2
    )
    tokens = [t + ["</s>"] for t in sp_src.encode(sources, out_type=str)]
    results = translator.translate_batch(tokens, beam_size=1, max_batch_size=64, return_scores=True)
    outputs = [sp_tgt.decode(r.hypotheses[0]) for r in results]
    return outputs, [from_log_prob(r.scores[0]) for r in results]


def verdicts(outputs: list[str], references: list[str]) -> dict[str, list[bool]]:
    """Whether each output is exact, and whether it is close, to its reference."""
    import sacrebleu

    exact = [normalise(h) == normalise(r) for h, r in zip(outputs, references, strict=True)]
    close = [
        sacrebleu.sentence_chrf(h, [r]).score >= CLOSE_CHRF
        for h, r in zip(outputs, references, strict=True)
    ]
    return {"exact": exact, "close": close}


def median(values: list[float]) -> float | None:
    """The median, or None for no values."""
    return statistics.median(values) if values else None


def summary(
    scores: list[float], right: list[bool], thresholds: Sequence[float] = THRESHOLDS
) -> dict[str, Any]:
    """AUC and the detection at each threshold, for one verdict."""
    auc = roc_auc(scores, right)
    rows = []
    for threshold in thresholds:
        found = detection(scores, right, threshold)
        rows.append(
            {
                "threshold": threshold,
                "flagged": found.flagged,
                "wrong_flagged": found.wrong_flagged,
                "precision": found.precision,
                "recall": found.recall,
            }
        )
    return {
        "right": sum(right),
        "wrong": len(right) - sum(right),
        "median_right": median([s for s, ok in zip(scores, right, strict=True) if ok]),
        "median_wrong": median([s for s, ok in zip(scores, right, strict=True) if not ok]),
        "auc": auc,
        "thresholds": rows,
    }


def measure(
    pair: str,
    compute_type: str,
    pairs: list[tuple[str, str]],
    thresholds: Sequence[float] = THRESHOLDS,
) -> dict[str, Any]:
    """Translate one direction at one compute type and summarise its scores."""
    english = [e for e, _ in pairs]
    german = [d for _, d in pairs]
    sources, references = (english, german) if pair == "en-de" else (german, english)
    outputs, scores = translate(ROOT / "models" / pair, sources, compute_type)
    found = verdicts(outputs, references)
    wrong = [
        {"source": s, "output": h, "reference": r, "score": round(sc, 4)}
        for s, h, r, sc, ok in zip(
            sources, outputs, references, scores, found["exact"], strict=True
        )
        if not ok
    ]
    return {
        "pair": pair,
        "compute_type": compute_type,
        "sentences": len(sources),
        "score_min": min(scores),
        "score_median": median(scores),
        "exact": summary(scores, found["exact"], thresholds),
        "close": summary(scores, found["close"], thresholds),
        "wrong_examples": sorted(wrong, key=lambda w: w["score"])[:10],
    }


def percent(value: float | None) -> str:
    """A share as a percentage for the table, or a dash where it is undefined."""
    return "-" if value is None else f"{100 * value:.0f} %"


def table(runs: list[dict[str, Any]], thresholds: Sequence[float] = THRESHOLDS) -> str:
    """The Markdown table docs/quality.md shows."""
    lines = [
        "| pair | compute | verdict | right / wrong | AUC | "
        + " | ".join(f"< {t}: flagged, precision, recall" for t in thresholds)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(thresholds),
    ]
    for run in runs:
        for verdict in ("exact", "close"):
            found = run[verdict]
            auc = "-" if found["auc"] is None else f"{found['auc']:.3f}"
            cells = [
                f"{row['flagged']}, {percent(row['precision'])}, {percent(row['recall'])}"
                for row in found["thresholds"]
            ]
            lines.append(
                f"| {run['pair']} | {run['compute_type']} | {verdict} | "
                f"{found['right']} / {found['wrong']} | {auc} | " + " | ".join(cells) + " |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=3000, help="held-out pairs to score")
    parser.add_argument("--name", default="quality", help="run name under bench/runs/")
    parser.add_argument(
        "--thresholds",
        type=float,
        nargs="+",
        default=list(THRESHOLDS),
        help="thresholds to report (default: stapel.scores.THRESHOLDS)",
    )
    args = parser.parse_args(argv)
    pairs = held_out(args.sentences)
    runs = [measure(p, ct, pairs, args.thresholds) for p in PAIRS for ct in COMPUTE_TYPES]
    path = write_run(
        run_path(args.name),
        {"thresholds": args.thresholds, "close_chrf": CLOSE_CHRF, "runs": runs},
        argv,
    )
    print(table(runs, args.thresholds))
    print(f"written to {path}")


if __name__ == "__main__":
    main()
