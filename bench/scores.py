"""What the confidence scores cost CTranslate2: the same call with and without scores.

    python -m bench.scores                 # Transformer-base, 1,500 segments, 6 pairs
    python -m bench.scores --segments 500 --pairs 3

The worker asks CTranslate2 for each hypothesis's score (`return_scores`: the segment's
confidence, stapel.scores), and so does `make bench`'s raw row unless given
`--raw-plain`. This runs raw's one call (the one-big row's segments, token budget,
threads and fixed output length) with and without the scores in one process,
alternating which goes first, and prints each time, the medians and their ratio: what
the scores cost the translation itself, which the CPU rows' ratios leave out. It also
checks what keeps the scores out of the model's fingerprint (and so out of the MT
cache's keys): the translations are the same with and without them.
Nothing is written; the benchmark model is built under .cache/models if missing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import sentencepiece as spm

from bench.throughput import MODEL_DIR, PAIR, bench_texts, one_call, raw_translator
from training.random_model import build_base


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=1500)
    parser.add_argument("--pairs", type=int, default=6, help="runs of each, alternating")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--decode", type=int, default=40, help="output tokens per segment")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument(
        "--model", type=Path, default=None, help="a model directory (default: the bench's)"
    )
    args = parser.parse_args(argv)
    args.device, args.parallel_batches = "cpu", 0

    path = args.model or MODEL_DIR / PAIR
    if args.model is None and not (path / "model.bin").exists():
        build_base(path)
    texts = bench_texts(1, args.segments, 1)[1]
    sp = spm.SentencePieceProcessor(model_file=str(path / "source.spm"))
    tokens = [t + ["</s>"] for t in sp.encode(texts, out_type=str)]
    translator = raw_translator(path, args, tokens[0])
    seconds: dict[bool, list[float]] = {False: [], True: []}
    outputs: dict[bool, list[list[str]]] = {}
    for n in range(args.pairs):
        for scores in (False, True) if n % 2 == 0 else (True, False):
            args.raw_plain = not scores
            started = time.perf_counter()
            results = one_call(translator, tokens, args)
            seconds[scores].append(time.perf_counter() - started)
            outputs.setdefault(scores, [r.hypotheses[0] for r in results])
            print(f"scores={scores!s:5} {seconds[scores][-1]:.2f} s", flush=True)
    if outputs[False] != outputs[True]:
        raise SystemExit("the translations differ with and without the scores")
    plain, scored = (statistics.median(seconds[k]) for k in (False, True))
    print(
        f"{len(tokens)} segments, {args.pairs} runs each: without scores {plain:.2f} s, "
        f"with {scored:.2f} s (medians): the scores cost {100 * (scored / plain - 1):+.1f}%; "
        "the translations are the same"
    )


if __name__ == "__main__":
    main()
