"""CTranslate2 alone, its threads split two ways: the choice behind STAPEL_PARALLEL_BATCHES.

    python -m bench.threads            # after `make bench-model`

For each split of the machine's threads (one batch on all of them; one batch per
thread; any --splits given), one `translate_batch` over the same segments with the
bench's token budget and decoding (40 tokens each), best of --repeat, side by side.
"""

from __future__ import annotations

import argparse
import os
import time

import ctranslate2
import sentencepiece as spm

from bench.throughput import MODEL_DIR, PAIR, one_call
from training.random_model import pseudo_corpus


def rate(translator: ctranslate2.Translator, tokens: list[list[str]], args) -> float:
    """Segments/s of raw's one translate_batch over tokens."""
    started = time.perf_counter()
    one_call(translator, tokens, args)
    return len(tokens) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    threads = os.cpu_count() or 1
    parser.add_argument("--segments", type=int, default=2000)
    parser.add_argument("--decode", type=int, default=40)
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--splits",
        default=f"1x{threads},{threads}x1",
        help="comma-separated BATCHESxTHREADS (inter x intra threads)",
    )
    args = parser.parse_args(argv)

    path = MODEL_DIR / PAIR
    sp = spm.SentencePieceProcessor(model_file=str(path / "source.spm"))
    texts = pseudo_corpus(args.segments, seed=5)
    tokens = [t + ["</s>"] for t in sp.encode(texts, out_type=str)]
    print(
        f"{len(tokens)} segments, {args.decode} output tokens each, "
        f"token budget {args.batch_tokens}, {threads} cores"
    )
    print(
        "| batches at once x threads each | segments/s (best of "
        f"{args.repeat}) | CPU cores busy |\n|---|---:|---:|"
    )
    for split in args.splits.split(","):
        inter, intra = (int(n) for n in split.split("x"))
        translator = ctranslate2.Translator(
            str(path), device="cpu", compute_type="auto", inter_threads=inter, intra_threads=intra
        )
        translator.translate_batch([tokens[0]], max_decoding_length=4)
        best, cores = 0.0, 0.0
        for _ in range(args.repeat):
            cpu, wall = time.process_time(), time.perf_counter()
            got = rate(translator, tokens, args)
            if got > best:
                best = got
                cores = (time.process_time() - cpu) / (time.perf_counter() - wall)
        print(f"| {inter} x {intra} | {best:.1f} | {cores:.2f} |")
        del translator


if __name__ == "__main__":
    main()
