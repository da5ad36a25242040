"""A watchdog pass against the backlog: reading every queue list vs the count check.

    python -m bench.watchdog                        # 1,000 and 10,000 queued chunks
    python -m bench.watchdog --backlog 1000 10000 50000 --repeat 5

For each backlog: that many queued chunks, sent a minute ago, each with its message
waiting in the `cpu` list (a real Redis, a SQLite file or DATABASE_URL). Times one pass
the old way (stapel.broker.waiting_task_ids reads and parses every message, then
reconcile checks every old queued chunk) and the new way (stapel.liveness: list lengths
against a count; nothing lost, so only never-sent chunks are selected). Writes
bench/runs/<name>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import redis
from alembic import command
from alembic.config import Config
from sqlalchemy import delete, insert

from bench.stack import free_port
from bench.stamp import run_path, write_run
from stapel.broker import waiting_task_ids
from stapel.db import make_engine, make_session_factory
from stapel.embedded_redis import start_server, wait_until_reachable
from stapel.liveness import live_task_ids
from stapel.settings import ROOT as REPO
from stapel.tables import Chunk, Job, Tenant, new_id, utcnow
from stapel.watchdog import reconcile

ROOT = Path(__file__).resolve().parent.parent
QUEUES = ["cpu", "gpu"]
GRACE_S = 30.0


def fill(sessions, client: redis.Redis, backlog: int) -> None:
    """Store backlog queued chunks (one job each 100) sent a minute ago, messages waiting."""
    client.flushdb()
    then = utcnow() - timedelta(minutes=1)
    with sessions() as session:
        for table in (Chunk, Job, Tenant):
            session.execute(delete(table))
        session.execute(insert(Tenant).values(id="t", name="bench", callback_secret="x"))
        jobs = [
            {"id": new_id(), "tenant_id": "t", "pool": "cpu", "source_lang": "en",
             "target_lang": "de", "documents_total": 1, "segments_total": 100,
             "chunks_total": 100, "created_at": then}
            for _ in range(max(1, backlog // 100))
        ]  # fmt: skip
        session.execute(insert(Job), jobs)
        chunks = [
            {"id": new_id(), "job_id": jobs[i // 100]["id"], "idx": i % 100, "pool": "cpu",
             "first_segment": 0, "end_segment": 1, "task_id": new_id(), "sent_at": then,
             "created_at": then}
            for i in range(backlog)
        ]  # fmt: skip
        session.execute(insert(Chunk), chunks)
        session.commit()
    pipe = client.pipeline(transaction=False)
    for chunk in chunks:  # kombu's message shape, as far as the watchdog reads it
        pipe.lpush("cpu", json.dumps({"headers": {"id": chunk["task_id"]}, "body": "x" * 600}))
    pipe.execute()


def old_pass(sessions, client: redis.Redis) -> None:
    live = waiting_task_ids(client, QUEUES)
    with sessions() as session:
        _reconcile(session, live)


def new_pass(sessions, client: redis.Redis) -> None:
    live = live_task_ids(client, sessions, QUEUES, {}, GRACE_S)
    with sessions() as session:
        _reconcile(session, live)


def _reconcile(session, live) -> None:
    report = reconcile(
        session,
        now=utcnow(),
        heartbeat_timeout_s=60,
        max_attempts=3,
        grace_s=GRACE_S,
        live_task_ids=live,
    )
    assert not report.to_send, "nothing was lost: a pass must resend nothing"


def timed(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="watchdog")
    parser.add_argument("--backlog", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="stapel-watchdog-"))
    server = start_server(free := free_port(), workdir / "redis", daemonize=False)
    try:
        url = f"redis://127.0.0.1:{free}/0"
        wait_until_reachable(url)
        client = redis.Redis.from_url(url)
        database_url = os.environ.get("DATABASE_URL") or f"sqlite:///{workdir / 'bench.db'}"
        config = Config(str(REPO / "alembic.ini"))
        config.attributes["database_url"] = database_url
        command.upgrade(config, "head")
        sessions = make_session_factory(make_engine(database_url))
        rows = []
        for backlog in args.backlog:
            fill(sessions, client, backlog)
            old = timed(lambda: old_pass(sessions, client), args.repeat)
            new = timed(lambda: new_pass(sessions, client), args.repeat)
            rows.append({"backlog": backlog, "old_pass_ms": old * 1000, "new_pass_ms": new * 1000})
            print(f"backlog {backlog:>7}: old pass {old * 1000:8.1f} ms, new {new * 1000:6.1f} ms")
        db = database_url.split(":", 1)[0]
        out = write_run(run_path(args.name), {"name": args.name, "db": db, "rows": rows})
        print(f"wrote {out}")
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
