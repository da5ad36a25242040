"""Peak memory of the engine translating in-process, with and without the batch memory bound.

    python -m bench.batch_memory --decode 256 --segments 400              # the default bound
    python -m bench.batch_memory --decode 256 --segments 400 --no-min     # outputs run long
    python -m bench.batch_memory --decode 256 --segments 400 --memory-tokens 0

One process per run (the peak resident set, VmHWM, only grows): the worker's engine
(its batcher, the worker's thread split, the bench's Transformer-base model under
.cache/models, `make bench-model`) translates the bench's seeded sentences at a fixed
output length, and prints the peak RSS, the rate and the mean batch. The bound is
STAPEL_BATCH_MEMORY_TOKENS: a batch's rows x (longest source + expected output) at most,
the expected output being twice the source plus 16 tokens within the minimum and maximum
decoding lengths (workers/batcher.py EXPECTED_OUTPUT); --no-min measures a model whose
outputs run to the maximum although the bound expected them short.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from bench.throughput import MODEL_DIR, PAIR, bench_model
from training.random_model import pseudo_corpus
from workers.engine import BATCH_LIMITS, Engine


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decode", type=int, default=256, help="output tokens per segment")
    parser.add_argument("--segments", type=int, default=400)
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument(
        "--memory-tokens",
        type=int,
        default=BATCH_LIMITS["cpu"][1],
        help="0: no bound (default: a CPU worker's)",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--no-min",
        action="store_true",
        help="no minimum decoding length: the bound counts the expected output, and the "
        "random model still decodes to --decode (the worst case an ordinary model's "
        "bound does not foresee)",
    )
    args = parser.parse_args(argv)
    bench_model(args)
    engine = Engine(
        MODEL_DIR,
        device="cpu",
        threads=args.threads,
        batch_tokens=args.batch_tokens,
        batch_memory_tokens=args.memory_tokens,
        max_decoding_length=args.decode,
        min_decoding_length=0 if args.no_min else args.decode,
    )
    engine.translate(PAIR, ["warm up"])
    loaded_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    texts = pseudo_corpus(args.segments, seed=5)
    started = time.perf_counter()
    engine.translate(PAIR, texts)
    seconds = time.perf_counter() - started
    stats = engine.model(PAIR).batcher.stats
    print(
        json.dumps(
            {
                "decode": args.decode,
                "segments": args.segments,
                "batch_tokens": args.batch_tokens,
                "memory_tokens": args.memory_tokens,
                "min_decoding_length": 0 if args.no_min else args.decode,
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                "rss_after_load_mib": loaded_mib,
                "segments_per_s": round(args.segments / seconds, 2),
                "batches": stats.batches,
                "mean_batch": round(stats.segments / max(stats.batches, 1), 1),
            }
        )
    )


if __name__ == "__main__":
    main()
