"""A worker's own capacity: one-segment jobs queued first, then one worker drains them.

    python -m bench.drain --name drain --jobs 2000          # SQLite (or DATABASE_URL)
    DATABASE_URL=postgresql://... python -m bench.drain --name drain-postgresql

The web stores `jobs` one-segment jobs with no worker running (their messages wait in
Redis) and stops; then one worker starts as the Procfile's `worker_cpu` does, on the
tiny random model with the MT cache off, so that what is measured is the stack's cost
per job, the regime a GPU's speed puts a worker in. The drain is timed from the first
job's end to the last's (the database's clock: `finished_at`), and the worker's CPU
time over the same span (from /proc, robust to a noisy machine), so start-up is left
out. Raw is CTranslate2 alone on the same segments. Writes the run to
bench/runs/<name>.json (bench/stamp.py), or --out.

With `--base` the worker translates with the Transformer-base benchmark model instead
(40 output tokens unless --decode says otherwise): on a GPU (`--device cuda`, as
bench/gpu.sh runs it) that is whether a worker keeps a real model busy with many small
jobs once the web is out of the way. Such a model ends its first jobs only with its
first batches, so there the span starts at the first job's claim (the model is loaded
before the worker consumes).
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from sqlalchemy import create_engine, text

from bench.stack import Stack, cpu_seconds, rss_peak_kib, thread_cpu_seconds, wait
from bench.stamp import run_path, write_run
from bench.throughput import Client, bench_model, body, raw_run, stack_env
from stapel.db import make_engine, make_session_factory
from stapel.keys import create_key
from training.random_model import pseudo_corpus
from workers.command import worker_command

SUBMITTERS = 16
POLL_S = 0.02
"""How often the first end is looked for (the worker's CPU is read then)."""


ENDED = "status NOT IN ('queued','running')"
STARTED = "started_at IS NOT NULL"


def _count(db, where: str) -> int:
    """How many jobs match `where` (ENDED, STARTED)."""
    with db.connect() as conn:
        return conn.execute(text(f"SELECT count(*) FROM jobs WHERE {where}")).scalar()


def _span(db, since: str) -> float:
    """Seconds from the first job's `since` (finished_at or started_at) to the last's end,
    on the database's clock."""
    with db.connect() as conn:
        first, last = conn.execute(text(f"SELECT min({since}), max(finished_at) FROM jobs")).one()
    if isinstance(first, str):  # SQLite stores text
        first, last = datetime.fromisoformat(first), datetime.fromisoformat(last)
    return (last - first).total_seconds()


def _profile(pid: int, out: str | None) -> subprocess.Popen | None:
    """Start py-spy on the worker (collapsed stacks of the threads holding the GIL)."""
    if not out:
        return None
    return subprocess.Popen(
        ["py-spy", "record", "--pid", str(pid), "--rate", "500", "--threads", "--gil"]
        + ["--nonblocking"]
        + ["--format", "raw", "-o", out],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def drain(args, texts: list[str]) -> dict:
    """Queue the jobs, stop the web, start one worker, time the drain."""
    workdir = Path(tempfile.mkdtemp(prefix="stapel-drain-"))
    env = {
        **stack_env(args),
        "STAPEL_FAIR_SHARE_STEP": "0",
        "STAPEL_QUOTA_JOBS_IN_FLIGHT": str(10 * len(texts)),
        **dict(kv.split("=", 1) for kv in args.env),
    }
    stack = Stack(workdir, env)
    try:
        stack.start_web(workers=args.web_processes)
        with make_session_factory(make_engine(stack.env["DATABASE_URL"]))() as session:
            key = create_key(session, "drain")[1]
        client = Client(stack, key)
        with ThreadPoolExecutor(max_workers=SUBMITTERS) as pool:
            ids = list(pool.map(lambda t: client.submit(body([t]))[0], texts))
        web = stack.procs.pop("web")
        os.killpg(web.pid, signal.SIGTERM)
        web.wait(timeout=60)
        db = create_engine(stack.env["DATABASE_URL"])
        name = "cpu-drain@bench"
        proc = stack._spawn(
            name,
            worker_command("cpu", name, args.concurrency),
            {**stack.env, "STAPEL_POOL": "cpu"},
        )
        spawned = time.perf_counter()
        # A slow model ends its first jobs only with its first batches, most of a short
        # drain: there the span starts at the first claim (after the model's load)
        first, since = (STARTED, "started_at") if args.base else (ENDED, "finished_at")
        wait(lambda: _count(db, first) > 0, 300, f"the first job's {since}", interval=POLL_S)
        cpu_first, threads_first = cpu_seconds(proc.pid), thread_cpu_seconds(proc.pid)
        spy = _profile(proc.pid, args.py_spy)
        first_s = time.perf_counter() - spawned
        wait(lambda: _count(db, ENDED) >= len(ids), 3600, f"{len(ids)} jobs ended", interval=0.2)
        cpu_last, threads_last = cpu_seconds(proc.pid), thread_cpu_seconds(proc.pid)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
        rss = rss_peak_kib(proc.pid) / 1024
        span = _span(db, since)
        with db.connect() as conn:
            failed = conn.execute(
                text("SELECT count(*) FROM jobs WHERE status != 'succeeded'")
            ).scalar()
        if failed:
            raise RuntimeError(f"{failed} jobs did not succeed")
    finally:
        stack.stop()
    jobs = len(ids) if args.base else len(ids) - 1  # the first end starts the span
    return {
        "jobs": len(ids),
        "database": stack.env["DATABASE_URL"].split(":", 1)[0],
        "jobs_per_s": jobs / span,
        "segments_per_s": jobs / span,
        "span_s": span,
        "first_end_after_s": first_s,
        "worker_cpu_ms_per_job": 1000 * (cpu_last - cpu_first) / jobs,
        "worker_peak_rss_mib": rss,
        "worker_cpu_s_by_thread": _by_thread(proc.pid, threads_first, threads_last),
    }


def _by_thread(pid: int, before: dict[int, float], after: dict[int, float]) -> dict[str, float]:
    """The worker's CPU seconds in the drain: its main thread (Celery's consumer), its
    busiest other threads, and the rest together."""
    spent = {tid: used - before.get(tid, 0.0) for tid, used in after.items()}
    main = spent.pop(pid, 0.0)
    ranked = sorted(spent.values(), reverse=True)
    return {
        "main": round(main, 2),
        **{f"busiest_{n + 1}": round(v, 2) for n, v in enumerate(ranked[:4])},
        "others": round(sum(ranked[4:]), 2),
        "others_count": len(ranked[4:]),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="drain")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--web-processes", type=int, default=None)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the worker")
    parser.add_argument("--out", default=None, help="where to write the run")
    parser.add_argument(
        "--py-spy", default=None, help="record the drain with py-spy here (pip install it first)"
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--parallel-batches", type=int, default=0)
    parser.add_argument(
        "--base",
        action="store_true",
        help="the Transformer-base benchmark model instead of the tiny one",
    )
    parser.add_argument("--decode", type=int, default=None, help="8, or 40 with --base")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    args = parser.parse_args(argv)
    args.tiny = not args.base
    if args.decode is None:
        args.decode = 40 if args.base else 8
    path = bench_model(args)
    texts = pseudo_corpus(args.jobs, seed=21)
    # raw's one call, as often as the drain runs: the median of each is its figure
    raw = sorted(raw_run(path, texts, args)["segments_per_s"] for _ in range(args.repeat))[
        args.repeat // 2
    ]
    runs = sorted((drain(args, texts) for _ in range(args.repeat)), key=lambda r: r["jobs_per_s"])
    row = runs[len(runs) // 2]
    row["ratio"] = row["segments_per_s"] / raw
    results = {
        "name": args.name,
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "model": "transformer-base" if args.base else "tiny",
        "device": args.device,
        "batch_tokens": args.batch_tokens,
        "decode_tokens": args.decode,
        "concurrency": args.concurrency,
        "raw_segments_per_s": raw,
        "drain": row,
        "runs_jobs_per_s": [r["jobs_per_s"] for r in runs],
        "runs_cpu_ms_per_job": [r["worker_cpu_ms_per_job"] for r in runs],
    }
    out = write_run(Path(args.out) if args.out else run_path(args.name), results)
    print(
        f"drain ({row['database']}, {row['jobs']} one-segment jobs, one worker): "
        f"{row['jobs_per_s']:.0f} jobs/s, {row['segments_per_s']:.0f} segments/s, "
        f"{row['ratio']:.3f} of raw's {raw:.0f}; worker CPU "
        f"{row['worker_cpu_ms_per_job']:.2f} ms/job; peak RSS {row['worker_peak_rss_mib']:.0f} MiB"
        f"\nworker CPU seconds by thread: {row['worker_cpu_s_by_thread']}"
        f"\nwritten to {out}"
    )


if __name__ == "__main__":
    main()
