"""The web app's CPU per `POST /v1/jobs`, in process: no HTTP server, no other load.

    python -m bench.post                          # SQLite in a temporary folder
    DATABASE_URL=postgresql://... python -m bench.post --posts 2000 --repeat 5

DATABASE_URL names a database of the bench's own: it is emptied and migrated first.
The app is the serving process's (`app.factory.serve`: the body guard, the access log,
rate limits, quotas and Idempotency-Keys on), called as a WSGI callable from one thread:
each POST stores a job of `--segments` segments and sends its chunk's message to Redis
(REDIS_URL, or a Redis of its own), and no worker runs. Every 40 POSTs, outside the
timing, the jobs in flight are marked finished, as workers keeping up would end them, so
the quota's count reads what it reads in service. Each run prints the process's CPU
(`time.process_time`) and wall time per POST after `--warmup` POSTs; what a POST costs
under granian and beside a worker, `bench.api` and `bench.throughput --tiny` measure.
Set two trees side by side by running this in each, alternating.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import update

from bench.stack import Stack
from stapel.settings import ROOT

FINISH_EVERY = 40


def _environ(body: bytes, key: str) -> dict:
    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/v1/jobs",
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1:8000",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_AUTHORIZATION": f"Bearer {key}",
        "HTTP_IDEMPOTENCY_KEY": uuid.uuid4().hex,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--posts", type=int, default=1000, help="timed POSTs a run")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--segments", type=int, default=2, help="segments a job")
    parser.add_argument("--repeat", type=int, default=3, help="runs, in one process")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="stapel-post-bench-"))
    # Redis (REDIS_URL, or one of its own) and the database, migrated; no process started
    stack = Stack(
        workdir,
        {
            "STAPEL_MODEL_ROOT": str(ROOT / "models"),
            "STAPEL_RATE_SUBMIT": "1000000/minute",
            "STAPEL_QUOTA_SEGMENTS_PER_DAY": "1000000000",
            "STAPEL_LOG_LEVEL": "WARNING",
        },
    )
    os.environ.update(stack.env)
    # the access log's lines (one write to stdout a request, a cost it keeps) go to a file
    stdout = os.dup(1)
    with open(workdir / "access.log", "wb") as log:
        os.dup2(log.fileno(), 1)
        try:
            results = _run(args, stack.env["DATABASE_URL"])
        finally:
            os.dup2(stdout, 1)
            stack.stop()
    print(json.dumps(results, indent=2))


def _run(args, database_url: str) -> dict:
    # imported once the environment names this run's database and Redis
    from app.factory import serve
    from stapel.db import make_engine, make_session_factory
    from stapel.keys import create_key
    from stapel.states import ACTIVE, Status
    from stapel.tables import Job

    engine = make_engine(database_url)
    with make_session_factory(engine)() as session:
        _row, key = create_key(session, "bench-post")
    app = serve()
    body = json.dumps(
        {
            "source_lang": "en",
            "target_lang": "de",
            "segments": [f"Segment number {i} of the job." for i in range(args.segments)],
        }
    ).encode()

    def finish() -> None:
        with engine.begin() as conn:
            conn.execute(update(Job).where(Job.status.in_(ACTIVE)).values(status=Status.SUCCEEDED))

    status: list[str] = []

    def start_response(code: str, _headers: list, _exc_info=None) -> None:
        status.append(code)

    def posts(count: int) -> tuple[float, float]:
        cpu = wall = 0.0
        for start in range(0, count, FINISH_EVERY):
            finish()
            t_cpu, t_wall = time.process_time(), time.perf_counter()
            for _ in range(min(FINISH_EVERY, count - start)):
                status.clear()
                answer = b"".join(app(_environ(body, key), start_response))
                if not status[0].startswith("202"):
                    raise SystemExit(f"POST answered {status[0]}: {answer[:300]!r}")
            cpu += time.process_time() - t_cpu
            wall += time.perf_counter() - t_wall
        return cpu, wall

    posts(args.warmup)
    runs = []
    for _ in range(args.repeat):
        cpu, wall = posts(args.posts)
        runs.append({"cpu_ms": cpu / args.posts * 1000, "wall_ms": wall / args.posts * 1000})
        print(
            f"CPU {runs[-1]['cpu_ms']:.3f} ms a POST, wall {runs[-1]['wall_ms']:.3f} ms",
            file=sys.stderr,
        )
    return {
        "database": database_url.split(":", 1)[0],
        "segments": args.segments,
        "posts": args.posts,
        "runs": runs,
        "cpu_ms_median": statistics.median(r["cpu_ms"] for r in runs),
    }


if __name__ == "__main__":
    main()
