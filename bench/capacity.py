"""Per-component figures for docs/capacity.md: API cost, DB writes and Redis ops per job.

    DATABASE_URL=postgresql://... python -m bench.capacity --jobs 200

A stack (the web: 1 process x 8 threads, one worker, the tiny test model so that the
worker is not what is measured) on PostgreSQL (the DB's own statistics count the writes)
and an embedded Redis (INFO commandstats counts the operations). Submits `jobs`
one-segment jobs from 8 client threads and waits until all are done. Reports: POSTs/s
and the web's CPU seconds per job (jobs/s per core = 1 / that), DB transactions, rows
inserted, updated and deleted per job, Redis commands per job by command. Writes
bench/runs/<name>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import redis
from sqlalchemy import create_engine, text

from bench.stack import Stack
from bench.stamp import run_path, write_run
from bench.throughput import Client, body
from stapel.db import make_engine, make_session_factory
from stapel.keys import create_key
from training.random_model import build as build_random_model

ROOT = Path(__file__).resolve().parent.parent
PG_STATS = (
    "SELECT xact_commit, tup_inserted, tup_updated, tup_deleted FROM pg_stat_database "
    "WHERE datname = current_database()"
)
STATS_FLUSH_S = 12
"""PostgreSQL 15 flushes an idle backend's statistics within 10 s."""


def pg_stats(url: str) -> dict[str, int]:
    with create_engine(url).connect() as conn:
        row = conn.execute(text(PG_STATS)).one()
    return dict(zip(("transactions", "inserted", "updated", "deleted"), row, strict=True))


def redis_calls(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="capacity")
    parser.add_argument("--jobs", type=int, default=200)
    args = parser.parse_args(argv)
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgresql"):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database of your own")
    workdir = Path(tempfile.mkdtemp(prefix="stapel-capacity-"))
    build_random_model(workdir / "models" / "en-de", seed=1)
    stack = Stack(
        workdir,
        {
            "STAPEL_MODEL_ROOT": str(workdir / "models"),
            "STAPEL_MAX_DECODING_LENGTH": "16",
            "STAPEL_LOG_LEVEL": "WARNING",
            "STAPEL_RATE_SUBMIT": "off",
            "STAPEL_RATE_READ": "off",
            "STAPEL_QUOTA_JOBS_IN_FLIGHT": "100000",
        },
    )
    try:
        stack.start_web(workers=1, threads=8)
        stack.start_worker("cpu", 16, {"STAPEL_PRELOAD": "en-de"})
        with make_session_factory(make_engine(url))() as session:
            key = create_key(session, "capacity")[1]
        client = Client(stack, key)
        rclient = redis.Redis.from_url(stack.env["REDIS_URL"])
        client.wait_done([client.submit(body(["Warm up."]))[0]], timeout=120)
        time.sleep(STATS_FLUSH_S)
        db0, r0, cpu0 = pg_stats(url), redis_calls(rclient), stack.cpu()
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=8) as pool:
            ids = list(pool.map(lambda i: client.submit(body([f"Job {i}."]))[0], range(args.jobs)))
        post_s = time.perf_counter() - started
        client.wait_done(ids, timeout=600)
        cpu1 = stack.cpu()
        time.sleep(STATS_FLUSH_S)
        db1, r1 = pg_stats(url), redis_calls(rclient)
        per_job = {k: round((db1[k] - db0[k]) / args.jobs, 1) for k in db0}
        calls = {k: v - r0.get(k, 0) for k, v in r1.items() if v - r0.get(k, 0) > 0}
        results = {
            "name": args.name,
            "jobs": args.jobs,
            "posts_per_s": round(args.jobs / post_s, 1),
            "web_cpu_s_per_job": round((cpu1["web"] - cpu0["web"]) / args.jobs, 4),
            "worker_cpu_s_per_job": round((cpu1["worker"] - cpu0["worker"]) / args.jobs, 4),
            "db_per_job": per_job,
            "redis_per_job": round(sum(calls.values()) / args.jobs, 1),
            "redis_calls_per_job": {
                k: round(v / args.jobs, 2) for k, v in sorted(calls.items(), key=lambda kv: -kv[1])
            },
            "note": "includes the watchdog (beat not running: none) and presence refreshes",
        }
    finally:
        stack.stop()
    write_run(run_path(args.name), results)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
