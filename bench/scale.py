"""More workers, more throughput: one backlog on 1 worker vs 2, and the autoscaler's lag.

    python -m bench.scale --name scale                      # 20 jobs of 2,000 segments
    python -m bench.scale --name quick --jobs 4 --segments 300 --decode 16

Rows: the same backlog (sent at once, on the benchmark model) on 1 worker and on 2
workers, each with STAPEL_THREADS translation threads (1: this machine has 2 cores);
the goal is 2 workers >= 1.8x the segments/s of 1. Then the local autoscaler, started
with one worker (min 1, max 2, no standby): time from the backlog's submit and from the
second worker's start until that worker claims its first chunk. Writes
bench/runs/<name>.json and prints a table.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from sqlalchemy import text

from bench.stack import Stack, wait
from bench.stamp import run_path, write_run
from bench.throughput import PAIR, Client, bench_model, body
from stapel.broker import make_celery
from stapel.db import make_engine, make_session_factory
from stapel.keys import create_key
from stapel.settings import Settings
from training.random_model import pseudo_corpus

ROOT = Path(__file__).resolve().parent.parent
STARTED = re.compile(r"^(\S+ \S+) INFO .*worker started pool=cpu worker=(\S+)", re.M)


def stack_env(args) -> dict:
    """The workers' settings: the benchmark model, fixed-length output, no tenant guards."""
    return {
        "STAPEL_MODEL_ROOT": str(bench_model(args).parent),
        "STAPEL_THREADS": str(args.threads),
        "STAPEL_MAX_DECODING_LENGTH": str(args.decode),
        "STAPEL_MIN_DECODING_LENGTH": str(args.decode),
        "STAPEL_CHUNK_SEGMENTS": str(args.chunk),
        # Two chunks per worker, the defaults' ratio (4,000 / 2,000): a worker takes no
        # more than that, so a backlog larger than one worker's budget waits in the queue.
        "STAPEL_WORKER_SEGMENTS": str(2 * args.chunk),
        "STAPEL_LOG_LEVEL": "INFO",
        "STAPEL_GPU_THRESHOLD": str(10**9),
        "STAPEL_RATE_SUBMIT": "off",
        "STAPEL_RATE_READ": "off",
        "STAPEL_FAIR_SHARE_STEP": "0",
        "STAPEL_QUOTA_JOBS_IN_FLIGHT": "100000",
        "STAPEL_QUOTA_SEGMENTS_PER_DAY": str(10**9),
        # the rows compare translation capacity: no sentence answered from the MT cache
        "STAPEL_CACHE": "off",
    }


def backlog(args) -> list[list[str]]:
    lines = pseudo_corpus(args.jobs * args.segments, seed=7)
    return [lines[i * args.segments : (i + 1) * args.segments] for i in range(args.jobs)]


def claims(client: Client) -> dict[str, int]:
    """Return worker -> chunks it claimed so far (the DB's chunks.worker)."""
    with client.db.connect() as conn:
        rows = conn.execute(
            text("SELECT worker, count(*) FROM chunks WHERE worker IS NOT NULL GROUP BY worker")
        )
        return {worker: n for worker, n in rows}


def open_stack(args, name: str) -> tuple[Stack, Client]:
    workdir = Path(tempfile.mkdtemp(prefix=f"stapel-scale-{name}-"))
    stack = Stack(workdir, stack_env(args))
    stack.start_web(workers=1)
    with make_session_factory(make_engine(stack.env["DATABASE_URL"]))() as session:
        key = create_key(session, "bench")[1]
    return stack, Client(stack, key)


def fixed_pool(args, workers: int, jobs: list[list[str]]) -> dict:
    """Translate the backlog on a fixed number of workers, started before it is sent."""
    stack, client = open_stack(args, f"fixed{workers}")
    try:
        for _ in range(workers):
            stack.start_worker("cpu", args.concurrency)
        started = time.perf_counter()
        ids = [client.submit(body(segments))[0] for segments in jobs]
        client.wait_done(ids, timeout=args.timeout)
        seconds = time.perf_counter() - started
        segments = sum(map(len, jobs))
        return {
            "workers": workers,
            "segments": segments,
            "seconds": round(seconds, 2),
            "segments_per_s": round(segments / seconds, 2),
            "chunks_per_worker": claims(client),
            "cpu_s": {k: round(v, 1) for k, v in stack.cpu().items()},
        }
    finally:
        stack.stop()


def autoscaled(args, jobs: list[list[str]]) -> dict:
    """Start the local autoscaler at min 1; time until its second worker claims a chunk."""
    stack, client = open_stack(args, "autoscale")
    env = {
        **stack.env,
        "STAPEL_AUTOSCALER_BACKEND": "local",
        "STAPEL_CPU_MIN": "1",
        "STAPEL_CPU_MAX": "2",
        "STAPEL_CPU_STANDBY": "0",
        "STAPEL_CPU_POLL_S": str(args.poll),
        "STAPEL_GPU_MAX": "0",
        "STAPEL_WORKER_CONCURRENCY": str(args.concurrency),
        "STAPEL_PRELOAD": PAIR,
    }
    log = stack.workdir / "autoscaler.log"
    try:
        stack._spawn("autoscaler", [sys.executable, "-m", "autoscaler"], env)
        first = wait(lambda: _started(log), 120, "the autoscaler's first worker")[0]
        wait(lambda: _answers(stack, first), 120, "the first worker to answer")
        first_ready = time.time() - _at(log, first)
        submitted = time.time()
        ids = [client.submit(body(segments))[0] for segments in jobs]
        second = wait(lambda: _started(log, 2), args.timeout, "a second worker")[1]
        claimed = wait(
            lambda: claims(client).get(second) and time.time(), args.timeout, "its first claim"
        )
        client.wait_done(ids, timeout=args.timeout)
        return {
            "first_worker_start_to_ping_s": round(first_ready, 2),
            "poll_s": args.poll,
            "submit_to_second_start_s": round(_at(log, second) - submitted, 2),
            "second_start_to_first_claim_s": round(claimed - _at(log, second), 2),
            "submit_to_second_claim_s": round(claimed - submitted, 2),
            "chunks_per_worker": claims(client),
            "seconds": round(time.time() - submitted, 2),
        }
    finally:
        stack.stop()


def _started(log: Path, count: int = 1) -> list[str] | None:
    names = [m.group(2) for m in STARTED.finditer(log.read_text())] if log.exists() else []
    return names if len(names) >= count else None


def _at(log: Path, worker: str) -> float:
    stamp = next(m.group(1) for m in STARTED.finditer(log.read_text()) if m.group(2) == worker)
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _answers(stack: Stack, worker: str) -> bool:
    celery = make_celery(Settings.from_env(stack.env))
    return bool(celery.control.ping(destination=[worker], timeout=0.5))


def print_table(results: dict) -> None:
    one, two = results["fixed"]
    print(f"\n{results['machine']}; {results['backlog']}; decode {results['decode']} tokens")
    for row in (one, two):
        print(
            f"{row['workers']} worker(s) x {results['threads']} thread: "
            f"{row['segments_per_s']:.1f} segments/s ({row['seconds']} s) "
            f"chunks {row['chunks_per_worker']}"
        )
    print(f"speed-up 2 vs 1: {results['speedup']:.2f}x (goal >= 1.8x)")
    auto = results.get("autoscaled")
    if auto:
        print(
            f"autoscaler (poll {auto['poll_s']} s): submit -> second worker started "
            f"{auto['submit_to_second_start_s']} s, -> its first claim "
            f"{auto['submit_to_second_claim_s']} s (start -> claim "
            f"{auto['second_start_to_first_claim_s']} s)"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="scale")
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--segments", type=int, default=2000, help="segments per job")
    parser.add_argument("--chunk", type=int, default=500, help="STAPEL_CHUNK_SEGMENTS")
    parser.add_argument("--decode", type=int, default=40, help="output tokens per segment")
    parser.add_argument("--threads", type=int, default=1, help="translation threads per worker")
    parser.add_argument("--concurrency", type=int, default=16, help="task threads per worker")
    parser.add_argument("--poll", type=float, default=5.0, help="the autoscaler's poll, s")
    parser.add_argument("--timeout", type=float, default=7200)
    parser.add_argument("--no-autoscaler", action="store_true")
    args = parser.parse_args(argv)
    jobs = backlog(args)
    results: dict = {
        "name": args.name,
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "backlog": f"{args.jobs} jobs x {args.segments} segments, chunks of {args.chunk}",
        "decode": args.decode,
        "threads": args.threads,
    }
    results["fixed"] = [fixed_pool(args, n, jobs) for n in (1, 2)]
    one, two = results["fixed"]
    results["speedup"] = round(two["segments_per_s"] / one["segments_per_s"], 3)
    if not args.no_autoscaler:
        results["autoscaled"] = autoscaled(args, jobs)
    out = write_run(run_path(args.name), results)
    print_table(results)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
