"""The batcher alone, in one process: many small jobs arriving at a given rate, vs raw.

    python -m bench.batcher                 # after `make bench-model`
    python -m bench.batcher --rate 0        # every job at once

The bench's 200 documents of 1-5 segments go to the worker's engine as 200 requests
(one per job, as the worker's tasks send them), `--rate` jobs per second; the row is
first submission to last translation. Raw is the bench's raw row on the same segments,
in the same process, median of --repeat runs each. No web, database or broker: what
separates this row from raw is the batcher itself.
"""

from __future__ import annotations

import argparse
import os
import time

from bench.throughput import BIG_SEGMENTS, LATENCY_SAMPLES, MODEL_DIR, PAIR, bench_texts, raw_rate
from workers.engine import Engine


def run(engine: Engine, docs: list[list[str]], rate: float) -> float:
    """Submit docs as requests at rate per second; return segments/s until all are back."""
    batcher = engine.model(PAIR).batcher
    started = time.perf_counter()
    requests = []
    for n, doc in enumerate(docs):
        if rate:
            time.sleep(max(0.0, started + n / rate - time.perf_counter()))
        requests.append(batcher.submit(list(enumerate(doc))))
    for request in requests:
        for _ in request:
            pass
    return sum(map(len, docs)) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=80.0, help="jobs per second (0: all)")
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--parallel-batches", type=int, default=0)
    parser.add_argument("--decode", type=int, default=40)
    parser.add_argument("--batch-tokens", type=int, default=4096)
    args = parser.parse_args(argv)
    args.device = "cpu"

    docs = bench_texts(args.docs, BIG_SEGMENTS, LATENCY_SAMPLES)[0]  # the many-small row's
    engine = Engine(
        MODEL_DIR,
        device="cpu",
        threads=args.threads,
        parallel_batches=args.parallel_batches,
        batch_tokens=args.batch_tokens,
        max_decoding_length=args.decode,
        min_decoding_length=args.decode,
    )
    engine.translate(PAIR, ["warm up"])
    raw = sorted(
        raw_rate(MODEL_DIR / PAIR, [t for d in docs for t in d], args) for _ in range(args.repeat)
    )[args.repeat // 2]
    rows = sorted(run(engine, docs, args.rate) for _ in range(args.repeat))
    got = rows[args.repeat // 2]
    arrival = f"{args.rate:g} jobs/s" if args.rate else "once"
    print(
        f"raw {raw:.1f} segments/s; batcher, {args.docs} jobs arriving at {arrival}: "
        f"{got:.1f} segments/s = {got / raw:.2f} of raw "
        f"(runs {', '.join(f'{r / raw:.2f}' for r in rows)})"
    )


if __name__ == "__main__":
    main()
