"""The API alone: one-segment POST /v1/jobs and GET /v1/jobs/<id> per second from one tenant.

    python -m bench.api                     # SQLite, 8/32/64 connections, 15 s each
    DATABASE_URL=postgresql://... python -m bench.api --history 100000
    python -m bench.api --finish-every 0        # jobs pile up within a row (the old bench)
    python -m bench.api --web-workers 4 --web-threads 2   # another split of the web
    python -m bench.api --connections 32 --post-rate 500 --get-rate 2000   # paced rows

The web runs as the Procfile runs it (`python -m app.server`: granian, 2 processes x 4
threads, or --web-workers x --web-threads) with quotas, rate limits and idempotency on
(limits set high enough not to refuse the load); no worker runs, so every job stays
queued. The load comes from wrk (Debian's `wrk` package: `apt-get install wrk`), which
uses a fraction of a core: each POST carries its own Idempotency-Key. `--history N`
first stores N finished jobs for the tenant, to show that the jobs-in-flight count does
not grow with a tenant's history. With no worker the jobs a row submits would stay
queued: the bench marks the queued jobs finished every `--finish-every` seconds while
the rows run (as workers keeping up would end them), so the tenant stays under the
service's default jobs-in-flight quota (1,000, on) and every row starts with none in
flight. `--finish-every 0` ends them only between rows, with the quota raised to
10,000,000 (a row's jobs then pile up, and the in-flight count reads them all).

By default each connection sends its next request as soon as the last is answered (a
closed loop: the rows measure the most the web takes, and the latency of a queue kept
full). `--post-rate R` / `--get-rate R` add rows paced at R requests/s in all (PACED_LUA:
wrk's threads each send their share on a fixed schedule), the latency a client sees while
the service carries that rate; each paced row reports the rate it reached beside the
offered one (behind schedule, a request goes out late and its wait before sending is not
counted, so a paced row is only honest where reached ~ offered).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import requests
from sqlalchemy import func, insert, select, update

from bench.stack import ROOT, Stack, cpu_seconds
from bench.stamp import run_path, write_run
from stapel.db import make_engine, make_session_factory
from stapel.keys import create_key
from stapel.tables import Job, new_id, utcnow

POST_LUA = """
-- wrk runs one Lua state per thread, each with the same random seed: the thread's own
-- number (set from setup) keeps their Idempotency-Keys apart, or half the POSTs would be
-- replays of the other thread's, cheaper than a new job.
local threads = 0
setup = function(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
counter = 0
request = function()
  counter = counter + 1
  local key = string.format("bench-%s-%d-%d-%d", run, tid, counter, math.random(1e9))
  wrk.headers["Idempotency-Key"] = key
  return wrk.format("POST", "/v1/jobs")
end
"""


PACED_LUA = """
-- Paced: each of wrk's threads sends one request every `interval` ms on a fixed schedule
-- (wrk asks delay() before each request). A thread behind schedule sends at once.
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } stapel_timespec;
int clock_gettime(int clock, stapel_timespec *tp);
]]
local now_ts = ffi.new("stapel_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, now_ts)  -- CLOCK_MONOTONIC
  return tonumber(now_ts.tv_sec) * 1000 + tonumber(now_ts.tv_nsec) / 1e6
end
local due = nil  -- when this thread's next request is due
delay = function()
  local now = now_ms()
  due = due or now
  local wait = due - now
  due = due + interval
  return math.max(0, math.floor(wait))
end
"""


def wrk(
    url: str,
    key: str,
    connections: int,
    seconds: int,
    script: str,
    body: str,
    rate: float = 0,
) -> dict:
    """Run wrk against url (paced at rate requests/s in all, or closed loop with 0);
    return requests/s, latency percentiles (ms) and non-2xx."""
    threads = min(2, connections)  # wrk wants a connection per thread at least
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(f'run = "{uuid.uuid4().hex[:12]}"\n')
        if rate:
            f.write(f"interval = {1000 * threads / rate!r}\n{PACED_LUA}")
        f.write(script)
        f.write(f'wrk.headers["Authorization"] = "Bearer {key}"\n')
        if body:
            f.write('wrk.headers["Content-Type"] = "application/json"\n')
            f.write(f"wrk.body = {json.dumps(body)}\n")
    try:
        out = _run_wrk(f.name, url, threads, connections, seconds)
    finally:
        Path(f.name).unlink()
    return {
        "connections": connections,
        "offered_per_s": rate or None,
        "requests": int(re.search(r"(\d+) requests in", out).group(1)),
        "requests_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "p50_ms": _latency(out, "50%"),
        "p99_ms": _latency(out, "99%"),
        "non_2xx": int(m.group(1)) if (m := re.search(r"Non-2xx.*?:\s+(\d+)", out)) else 0,
        "errors": "Socket errors" in out,
    }


def _run_wrk(script: str, url: str, threads: int, connections: int, seconds: int) -> str:
    """Run wrk with the Lua script; return its report."""
    return subprocess.run(
        [
            "wrk",
            "-t",
            str(threads),
            "-c",
            str(connections),
            "-d",
            f"{seconds}s",
            "--latency",
            "-s",
            script,
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _latency(out: str, pct: str) -> float:
    value, unit = re.search(rf"{pct}\s+([\d.]+)(us|ms|s)\b", out).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def store_history(sessions, tenant_id: str, count: int) -> None:
    """Store count finished one-segment jobs for the tenant, quickly (bulk inserts)."""
    now = utcnow()
    with sessions() as s:
        for start in range(0, count, 5000):
            s.execute(
                insert(Job),
                [
                    {
                        "id": new_id(),
                        "tenant_id": tenant_id,
                        "status": "succeeded",
                        "pool": "cpu",
                        "source_lang": "en",
                        "target_lang": "de",
                        "priority": 5,
                        "documents_total": 1,
                        "segments_total": 1,
                        "segments_done": 1,
                        "chunks_total": 1,
                        "attempts": 1,
                        "created_at": now,
                        "finished_at": now,
                    }
                    for _ in range(min(5000, count - start))
                ],
            )
            s.commit()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", default="8,32,64")
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--history", type=int, default=0)
    parser.add_argument("--finish-every", type=float, default=0.25)
    parser.add_argument(
        "--post-rate", type=float, default=0, help="also a POST row paced at this rate/s"
    )
    parser.add_argument(
        "--get-rate", type=float, default=0, help="also a status row paced at this rate/s"
    )
    parser.add_argument(
        "--web-workers", type=int, default=None, help="web processes (the Procfile's)"
    )
    parser.add_argument(
        "--web-threads", type=int, default=None, help="threads per process (the Procfile's)"
    )
    parser.add_argument("--out", type=Path, default=run_path("api"))
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("bench.api needs wrk: apt-get install wrk")
    workdir = Path(tempfile.mkdtemp(prefix="stapel-api-bench-"))
    stack = Stack(
        workdir,
        {
            "STAPEL_MODEL_ROOT": str(ROOT / "models"),
            "STAPEL_RATE_SUBMIT": "1000000/minute",
            "STAPEL_RATE_READ": "1000000/minute",
            "STAPEL_QUOTA_JOBS_IN_FLIGHT": "1000" if args.finish_every else "10000000",
            "STAPEL_QUOTA_SEGMENTS_PER_DAY": "100000000",
            "STAPEL_LOG_LEVEL": "WARNING",
        },
    )
    try:
        sessions = make_session_factory(make_engine(stack.env["DATABASE_URL"]))
        with sessions() as s:
            row, key = create_key(s, "bench")
            tenant_id = row.tenant_id
        if args.history:
            store_history(sessions, tenant_id, args.history)
        workers, threads = stack.start_web(args.web_workers, args.web_threads)
        results = run(stack, key, args)
        results["database"] = stack.env["DATABASE_URL"].split(":", 1)[0]
        results["history"] = args.history
        results["web"] = f"{workers} processes x {threads} threads"
        write_run(args.out, results)
        print(json.dumps(results, indent=2))
    finally:
        stack.stop()


def run(stack: Stack, key: str, args) -> dict:
    """POST rows at each connection count, then GET status rows; CPU of the web per row."""
    url = stack.url
    body = json.dumps({"source_lang": "en", "target_lang": "de", "segments": ["Hello world."]})
    job = requests.post(
        f"{url}/v1/jobs",
        data=body,
        timeout=10,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    ).json()
    rows: dict = {"post": [], "get": []}
    sessions = make_session_factory(make_engine(stack.env["DATABASE_URL"]))
    targets = {
        "post": (f"{url}/v1/jobs", POST_LUA, body),
        "get": (f"{url}{job['links']['self']}", "", ""),
    }
    paced = [
        (kind, rate) for kind, rate in (("post", args.post_rate), ("get", args.get_rate)) if rate
    ]
    for connections in (int(c) for c in args.connections.split(",")):
        finish_queued(sessions)
        for kind, rate in [("post", 0), ("get", 0), *paced]:
            target, script, payload = targets[kind]
            before, started, stored = web_cpu(stack), time.monotonic(), jobs_stored(sessions)
            with Finisher(sessions, args.finish_every if kind == "post" else 0):
                row = wrk(target, key, connections, args.seconds, script, payload, rate)
            row["web_cores"] = round((web_cpu(stack) - before) / (time.monotonic() - started), 2)
            if kind == "post":  # every POST a new job: a replay would be another request
                row["jobs_stored"] = jobs_stored(sessions) - stored
            rows[kind].append(row)
            print(kind, row, flush=True)
    return rows


def jobs_stored(sessions) -> int:
    """Return how many jobs the database holds."""
    with sessions() as s:
        return s.scalar(select(func.count()).select_from(Job))


def finish_queued(sessions) -> None:
    """Mark every queued job succeeded (outside the timed rows), as workers would."""
    with sessions() as s:
        s.execute(
            update(Job)
            .where(Job.status == "queued")
            .values(status="succeeded", segments_done=Job.segments_total, finished_at=utcnow())
        )
        s.commit()


class Finisher:
    """While the block runs, mark the queued jobs finished every `every` seconds (0: never)."""

    def __init__(self, sessions, every: float) -> None:
        self.sessions, self.every = sessions, every
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopped.wait(self.every):
            finish_queued(self.sessions)

    def __enter__(self) -> Finisher:
        if self.every:
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        if self.every:
            self.thread.join()


def web_cpu(stack: Stack) -> float:
    return sum(cpu_seconds(pid) for pid in stack.pids("web"))


if __name__ == "__main__":
    main()
