"""The day's usage write on job storage: one row, a row per thread, the statement made per
call, or no write at all.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/scratch python -m bench.usage_rows
    python -m bench.usage_rows --threads 8 --seconds 6 --rounds 4

Threads of one process store 3-segment jobs for one tenant (`stapel.jobs.store_job`,
which adds the job's segments to the tenant's `usage_days` row before its commit) as
fast as they can, in rounds that take turns: every write on one row (`one_row`), each
thread on its own row (`per_thread`, what `stapel.ledger` does), the same with the
upsert statement made at each call instead of once (`statement_per_call`), and the
write left out (`without`). Prints and writes jobs stored per second per round. The jobs stay in the
database: give it a scratch one (the URL's database is migrated to head).
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session, sessionmaker

from bench.stamp import ROOT, run_path, write_run
from stapel import jobs, ledger
from stapel.db import make_engine, make_session_factory
from stapel.jobs import DocumentSpec, JobSpec
from stapel.keys import create_key
from stapel.tables import UsageDay

SPEC = JobSpec("en", "de", [DocumentSpec(None, ["Hello world.", "A second one.", "Third."])])
MODES = ("one_row", "per_thread", "statement_per_call", "without")


def _rate(sessions: sessionmaker[Session], tenant: str, threads: int, seconds: float) -> float:
    stop = time.monotonic() + seconds
    stored = [0] * threads

    def work(n: int) -> None:
        with sessions() as session:
            while time.monotonic() < stop:
                jobs.store_job(session, tenant, SPEC, gpu_threshold=3000, chunk_segments=2000)
                stored[n] += 1

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(stored) / seconds


def _add_making_the_statement(conn, tenant_id, day, *, segments=0, characters=0) -> None:
    """`ledger.add` as it was: the upsert made at each call."""
    statement = postgresql.insert(UsageDay).values(
        tenant_id=tenant_id, day=day, slot=ledger._slot(), segments=segments, characters=characters
    )
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=[UsageDay.tenant_id, UsageDay.day, UsageDay.slot],
            set_={
                "segments": UsageDay.segments + statement.excluded.segments,
                "characters": UsageDay.characters + statement.excluded.characters,
            },
        )
    )


def _mode(name: str) -> tuple[Callable, Callable[[], int]]:
    """Return (ledger.add, ledger._slot) for a mode."""
    add, slot = ledger.add, ledger._slot
    if name == "one_row":
        return add, lambda: 0
    if name == "statement_per_call":
        return _add_making_the_statement, slot
    if name == "without":
        return (lambda *_args, **_kwargs: None), slot
    return add, slot


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", default=str(run_path("usage_rows")))
    args = parser.parse_args(argv)
    url = os.environ.get("DATABASE_URL") or ""
    if not url.startswith("postgresql"):
        parser.error("set DATABASE_URL to a scratch PostgreSQL database")
    config = Config(str(ROOT / "alembic.ini"))
    config.attributes["database_url"] = url
    command.upgrade(config, "head")
    sessions = make_session_factory(make_engine(url))
    with sessions() as session:
        tenant_id = create_key(session, f"bench-usage-{os.getpid()}")[0].tenant_id
        session.commit()
    modes = {name: _mode(name) for name in MODES}
    _rate(sessions, tenant_id, args.threads, 2.0)  # warm the pool and the plans
    rows: list[dict] = []
    for round_ in range(args.rounds):
        for name in MODES:
            ledger.add, ledger._slot = modes[name]
            rate = _rate(sessions, tenant_id, args.threads, args.seconds)
            rows.append({"round": round_, "mode": name, "jobs_per_s": round(rate, 1)})
            print(f"round={round_} mode={name} jobs_per_s={rate:.0f}", flush=True)
    ledger.add, ledger._slot = modes["per_thread"]
    for name in MODES:
        rates = sorted(r["jobs_per_s"] for r in rows if r["mode"] == name)
        print(f"{name}: {rates[0]:.0f}-{rates[-1]:.0f} jobs/s")
    write_run(Path(args.out), {"name": "usage_rows", "threads": args.threads, "rows": rows})


if __name__ == "__main__":
    main()
