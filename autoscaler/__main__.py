"""`python -m autoscaler`: one control loop per enabled pool until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import logging
import signal
import threading

import redis

from autoscaler.backends import make_backend
from autoscaler.config import AutoscalerSettings
from autoscaler.loop import PoolLoop
from stapel import logs
from stapel.db import make_engine, make_session_factory
from stapel.settings import current

log = logging.getLogger("autoscaler")


USAGE = """\
Keep each pool's worker count at what its backlog needs (docs/autoscaling.md).
Configured by the environment only:
  STAPEL_AUTOSCALER_BACKEND   local | kubernetes | dry-run (default dry-run)
  DATABASE_URL, REDIS_URL     the job store and the broker (presence records)
  STAPEL_<POOL>_MIN, _MAX, _STANDBY, _SCALE_DOWN_DELAY_S, _POLL_S,
  _CHUNKS_PER_WORKER, _QUEUED_PER_WORKER, _UNSERVED_GRACE_S, _DEPLOYMENT
                              per pool (CPU, GPU; MAX=0 disables)
  STAPEL_WORKER_CONCURRENCY   task threads of a worker the local backend starts
  STAPEL_K8S_NAMESPACE, STAPEL_K8S_TIMEOUT_S   the kubernetes backend
Runs until SIGTERM or SIGINT."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line: only --help (settings come from the environment)."""
    parser = argparse.ArgumentParser(
        prog="python -m autoscaler",
        description=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Read the settings, start a loop thread per pool, stop them cleanly on a signal."""
    parse_args(argv)
    logs.configure(current())
    settings = AutoscalerSettings.from_env()
    sessions = make_session_factory(make_engine(settings.database_url))
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=5, socket_connect_timeout=5)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    loops = [
        PoolLoop(p, make_backend(settings, p), sessions, client)
        for p in settings.pools
        if p.enabled
    ]
    log.info(
        "autoscaler started backend=%s pools=%s",
        settings.backend,
        ",".join(loop.pool.name for loop in loops) or "-",
    )
    threads = [
        threading.Thread(target=loop.run, args=(stop,), name=f"scale-{loop.pool.name}")
        for loop in loops
    ]
    for thread in threads:
        thread.start()
    while not stop.wait(1.0):
        pass
    for thread in threads:
        thread.join()
    for loop in loops:
        loop.backend.close()
    log.info("autoscaler stopped")


if __name__ == "__main__":
    main()
