"""Translate each sentence once: Stapel with its MT cache and dedup against raw CTranslate2.

    python -m bench.reuse --name reuse           # writes bench/runs/reuse.json
    python -m bench.reuse --name reuse-quick --docs 40 --decode 16

A seeded corpus of small jobs (1-5 segments each, --docs of them) where a third of the
segments repeat an earlier segment, drawn with a Zipf-like law (weight 1/rank of first
appearance), the rest unique. Rows, each against raw CTranslate2 translating every
segment of the row in one translate_batch (raw has no memory: it translates every repeat
again; beside it, raw on the distinct segments alone, the cold row's ceiling: what a
system that translated each distinct segment once at raw's speed and cost nothing else
would reach):
  - repeats, cold: the cache empty (a tenant of its own); repeats are shared in flight
    and by the cache as the run goes;
  - repeats, second run: the same jobs sent again by that tenant (each answered from the
    cache at submit, stapel.submit.cached_answer); cold and second run --repeat times,
    each time on a new tenant, medians kept;
  - no repeats, cache on vs cache off: a corpus without repeats, cache lookups and
    inserts against none (`"cache": false` on each job: today's many-small row); each
    pair of runs alternates on fresh corpora, medians kept.
Same stack and settings as bench.throughput (one worker, the Transformer-base random model).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
from pathlib import Path

from bench.stack import Stack, free_port
from bench.stamp import run_path, write_run
from bench.throughput import (
    ROOT,
    WARM_UP_DOCS,
    Client,
    WorkerProbe,
    bench_model,
    many_small,
    raw_rate,
    stack_env,
)
from stapel.db import make_engine, make_session_factory
from stapel.keys import create_key
from training.random_model import pseudo_corpus
from workers.engine import pick_parallel

REPEAT_SHARE = 1 / 3
"""The share of segments that repeat a segment seen earlier in the corpus."""


def corpus(docs: int, seed: int, repeats: bool) -> list[list[str]]:
    """Return docs small documents of 1-5 segments; with repeats a third repeat earlier ones.

    A repeat draws one of the lines seen so far with weight 1/rank, ranked by first
    appearance (a Zipf-like law: the first lines are the boilerplate every job carries);
    every other segment is a new line.
    """
    rng = random.Random(seed)
    sizes = [rng.randint(1, 5) for _ in range(docs)]
    lines = iter(pseudo_corpus(sum(sizes), seed=seed))
    seen: list[str] = []
    weights: list[float] = []
    out = []
    for size in sizes:
        doc = []
        for _ in range(size):
            if repeats and seen and rng.random() < REPEAT_SHARE:
                doc.append(rng.choices(seen, weights)[0])
                continue
            seen.append(next(lines))
            weights.append(1 / len(seen))
            doc.append(seen[-1])
        out.append(doc)
    return out


def run(probe: WorkerProbe, client: Client, docs: list[list[str]], cache: bool) -> dict:
    """Send the docs as small jobs at once (cache on or off) and time them to done."""
    original = client.submit

    def submit(body: dict):
        return original({**body, "cache": cache})

    client.submit = submit  # type: ignore[method-assign]
    try:
        row = probe.during(many_small, client, docs)
    finally:
        client.submit = original  # type: ignore[method-assign]
    row["segments_per_s"] = row["segments"] / row["seconds"]
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="reuse")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--parallel-batches", type=int, default=0)
    parser.add_argument("--decode", type=int, default=40, help="output tokens per segment")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--pairs", type=int, default=3, help="cache on/off runs without repeats")
    parser.add_argument(
        "--repeat", type=int, default=3, help="cold and second runs, each on a fresh tenant"
    )
    args = parser.parse_args(argv)

    path = bench_model(args)
    repeated = corpus(args.docs, seed=21, repeats=True)
    flat = [t for d in repeated for t in d]
    distinct = list(dict.fromkeys(flat))
    print("raw CTranslate2, every segment and the distinct ones alone ...", flush=True)
    raw_runs, distinct_runs = [], []
    for _ in range(max(1, args.repeat)):  # side by side, alternating
        raw_runs.append(raw_rate(path, flat, args))
        distinct_runs.append(raw_rate(path, distinct, args))
    raw = statistics.median(raw_runs)
    # the cold row's ceiling, as a ratio to raw: raw's time on every segment over its
    # time on the distinct ones (the repeats are the short boilerplate: less than
    # segments / distinct)
    ceiling = statistics.median(
        (len(flat) / a) / (len(distinct) / b) for a, b in zip(raw_runs, distinct_runs, strict=True)
    )
    stack = Stack(
        Path(tempfile.mkdtemp(prefix="stapel-reuse-")),
        {
            **stack_env(args),
            "STAPEL_CACHE": "on",
            "STAPEL_FAIR_SHARE_STEP": "0",
            "STAPEL_QUOTA_JOBS_IN_FLIGHT": "100000",
        },
    )
    rows: dict = {}
    pairs: dict[str, list[dict]] = {"off": [], "on": []}
    repeats: dict[str, list[dict]] = {"cold": [], "second run": []}
    try:
        stack.start_web()
        port = free_port()
        stack.start_worker("cpu", args.concurrency, {"STAPEL_METRICS_PORT": str(port)})
        parallel = pick_parallel(args.device, args.threads, args.parallel_batches)[0]
        probe = WorkerProbe(f"http://127.0.0.1:{port}/metrics", stack, parallel)
        sessions = make_session_factory(make_engine(stack.env["DATABASE_URL"]))
        with sessions() as session:
            key = create_key(session, "bench")[1]
        client = Client(stack, key)
        print("warm-up ...", flush=True)
        many_small(client, [[t] for t in pseudo_corpus(WARM_UP_DOCS, seed=11)])
        for n in range(args.pairs):
            for mode in ("off", "on") if n % 2 == 0 else ("on", "off"):
                print(f"no repeats, cache {mode} ({n + 1}/{args.pairs}) ...", flush=True)
                fresh = corpus(args.docs, seed=100 + 2 * n + (mode == "on"), repeats=False)
                pairs[mode].append(run(probe, client, fresh, cache=mode == "on"))
        for n in range(args.repeat):
            # a tenant of its own each time: its cache scope starts empty (not shared)
            with sessions() as session:
                fresh_client = Client(stack, create_key(session, f"bench-repeats-{n}")[1])
            for row in ("cold", "second run"):
                print(f"repeats, {row} ({n + 1}/{args.repeat}) ...", flush=True)
                repeats[row].append(run(probe, fresh_client, repeated, cache=True))
    finally:
        stack.stop()
    for name, runs in [
        *((f"repeats, {row}", r) for row, r in repeats.items()),
        *((f"no repeats, cache {mode}", r) for mode, r in pairs.items()),
    ]:
        rates = [r["segments_per_s"] for r in runs]
        median = sorted(runs, key=lambda r: r["segments_per_s"])[len(rates) // 2]
        rows[name] = {**median, "runs_segments_per_s": rates}
    results = {
        "name": args.name,
        "docs": args.docs,
        "segments": len(flat),
        "distinct_segments": len(distinct),
        "decode_tokens": args.decode,
        "raw_segments_per_s": raw,
        "raw_runs_segments_per_s": raw_runs,
        "raw_note": "raw CTranslate2 has no memory: every segment translated, repeats included",
        "raw_distinct_runs_segments_per_s": distinct_runs,
        "cold_ceiling": ceiling,
        "rows": rows,
        "cold_no_repeats_vs_off": statistics.median(
            on / off
            for on, off in zip(
                rows["no repeats, cache on"]["runs_segments_per_s"],
                rows["no repeats, cache off"]["runs_segments_per_s"],
                strict=True,
            )
        ),
    }
    out = write_run(run_path(args.name), results)
    print(f"\n{len(flat)} segments ({len(distinct)} distinct) in {args.docs} jobs")
    print("| row | segments/s | ratio to raw (no memory) |\n|---|---:|---:|")
    print(f"| raw CTranslate2, one call | {raw:.1f} | 1.00 |")
    for name, row in rows.items():
        print(f"| {name} | {row['segments_per_s']:.1f} | {row['segments_per_s'] / raw:.2f} |")
    cold = rows["repeats, cold"]["segments_per_s"] / raw
    print(
        f"cold row's ceiling (raw on the {len(distinct)} distinct segments alone): "
        f"{ceiling:.2f}x; the cold row reached {cold / ceiling:.2f} of it"
    )
    print(
        f"cache on / off without repeats (median of pairs): {results['cold_no_repeats_vs_off']:.3f}"
    )
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
