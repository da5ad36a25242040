"""`python -m autoscaler`: one control loop per enabled pool until SIGTERM or SIGINT."""

from __future__ import annotations

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


def main() -> None:
    """Read the settings, start a loop thread per pool, stop them cleanly on a signal."""
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
