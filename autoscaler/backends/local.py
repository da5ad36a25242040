"""Run a pool's workers as Celery processes on this machine (what `make run` uses).

Scale-up starts `celery -A workers.celery_app worker -Q <pool>,control -n <pool>-<id>@<host>`;
scale-down sends SIGTERM (Celery's warm shutdown: finish running tasks, then exit) to
idle workers only, and never kills one. Exited processes are reaped on every read.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path

from autoscaler.victims import WorkerView, idle_victims
from stapel.settings import ROOT
from workers.command import worker_command

log = logging.getLogger(__name__)


class LocalBackend:
    """Starts, stops and reaps worker processes for one pool."""

    def __init__(
        self,
        pool: str,
        *,
        concurrency: int = 128,
        env: dict | None = None,
        log_dir: Path | None = None,
        cwd: Path = ROOT,
    ) -> None:
        self.pool, self.concurrency, self.cwd, self.log_dir = pool, concurrency, cwd, log_dir
        self.env = {**(os.environ if env is None else env), "STAPEL_POOL": pool}
        self.host = socket.gethostname()
        self.procs: dict[str, subprocess.Popen] = {}
        self.stopping: dict[str, subprocess.Popen] = {}

    def command(self, name: str) -> list[str]:
        """Return the command line that starts one worker named name."""
        return worker_command(self.pool, name, self.concurrency)

    def reap(self) -> None:
        """Forget exited workers, logging any that exited without being told to."""
        for name, proc in list(self.procs.items()):
            if proc.poll() is not None:
                del self.procs[name]
                log.warning(
                    "worker exited unexpectedly pool=%s worker=%s code=%s",
                    self.pool,
                    name,
                    proc.returncode,
                )
        for name, proc in list(self.stopping.items()):
            if proc.poll() is not None:
                del self.stopping[name]
                log.info(
                    "worker stopped pool=%s worker=%s code=%s", self.pool, name, proc.returncode
                )

    def replicas(self) -> int:
        self.reap()
        return len(self.procs)

    def workers(self) -> list[str]:
        self.reap()
        return list(self.procs)

    def scale(self, replicas: int, workers: list[WorkerView]) -> None:
        self.reap()
        for _ in range(replicas - len(self.procs)):
            self._start()
        excess = len(self.procs) - replicas
        if excess <= 0:
            return
        ours = [w for w in workers if w.name in self.procs]
        victims = idle_victims(ours, excess)
        if len(victims) < excess:
            log.info(
                "fewer idle workers than wanted pool=%s idle=%d excess=%d",
                self.pool,
                len(victims),
                excess,
            )
        for worker in victims:
            self._stop(worker.name)

    def _start(self) -> None:
        name = f"{self.pool}-{secrets.token_hex(3)}@{self.host}"
        out = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"{name}.log", "ab")
        try:
            proc = subprocess.Popen(
                self.command(name),
                cwd=self.cwd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT if out else None,
                start_new_session=True,
            )
        finally:
            if out is not None:
                out.close()
        self.procs[name] = proc
        log.info("worker started pool=%s worker=%s pid=%d", self.pool, name, proc.pid)

    def _stop(self, name: str) -> None:
        proc = self.procs.pop(name)
        self.stopping[name] = proc
        proc.send_signal(signal.SIGTERM)
        log.info(
            "worker stopping (warm shutdown) pool=%s worker=%s pid=%d", self.pool, name, proc.pid
        )

    def close(self, timeout_s: float | None = None) -> bool:
        """Warm-stop every worker and wait for them; return whether all exited in time."""
        for name in list(self.procs):
            self._stop(name)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for proc in list(self.stopping.values()):
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            try:
                proc.wait(left)
            except subprocess.TimeoutExpired:
                break
        self.reap()
        return not self.stopping
