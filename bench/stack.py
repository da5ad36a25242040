"""A whole Stapel stack in subprocesses for benchmarks: Redis, DB, the web, workers."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import requests
from alembic import command
from alembic.config import Config

from app.server import options as web_options
from stapel.broker import make_celery
from stapel.embedded_redis import reachable, start_server, wait_until_reachable
from stapel.metrics import MULTIPROC_ENV
from stapel.settings import ROOT, Settings
from workers.command import worker_command


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait(check, timeout: float, what: str, interval: float = 0.1):
    """Poll check() every interval s until truthy; raise TimeoutError after timeout s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except (requests.RequestException, OSError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout}s")
        time.sleep(interval)


def rss_peak_kib(pid: int) -> int:
    """Return a process's peak resident set (VmHWM) in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _stat_cpu_seconds(stat: Path) -> float | None:
    """Return user + system CPU seconds from a /proc stat file (None if it is gone)."""
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """Return the CPU time (user + system, all threads) a process has used so far."""
    return _stat_cpu_seconds(Path(f"/proc/{pid}/stat")) or 0.0


def thread_cpu_seconds(pid: int) -> dict[int, float]:
    """Return the CPU time (user + system) each thread of a process has used so far."""
    used = {
        int(task.name): _stat_cpu_seconds(task / "stat")
        for task in Path(f"/proc/{pid}/task").glob("*")
    }
    return {tid: seconds for tid, seconds in used.items() if seconds is not None}  # gone: out


def children(pid: int) -> list[int]:
    """Return the direct child pids of pid."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


KEEP_ENV = "STAPEL_BENCH_KEEP"
"""Set (to anything) to keep every stack's folder (its logs, its SQLite file) after it stops."""


class Stack:
    """Starts the processes; stop() ends them all and removes the stack's folder (workdir,
    a temporary one of its own), unless it stops on an error or KEEP_ENV is set: then it
    says where the logs are."""

    def __init__(self, workdir: Path, env: dict) -> None:
        self.workdir = workdir
        self.exit = ExitStack()
        self.procs: dict[str, subprocess.Popen] = {}
        self.redis_pid: int | None = None
        redis_url = os.environ.get("REDIS_URL")
        if not redis_url or not reachable(redis_url):
            port = free_port()
            proc = start_server(port, workdir / "redis", daemonize=False)
            self.exit.callback(proc.wait, 10)  # after terminate: callbacks run last first
            self.exit.callback(proc.terminate)
            self.redis_pid = proc.pid
            redis_url = f"redis://127.0.0.1:{port}/0"
            wait_until_reachable(redis_url)
        database_url = os.environ.get("DATABASE_URL") or f"sqlite:///{workdir / 'bench.db'}"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **env, "REDIS_URL": redis_url, "DATABASE_URL": database_url}
        config = Config(str(ROOT / "alembic.ini"))
        config.attributes["database_url"] = database_url
        command.downgrade(config, "base")
        command.upgrade(config, "head")

    def _spawn(self, name: str, args: list[str], env: dict | None = None) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "ab")
        proc = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env or self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def start_web(self, workers: int | None = None, threads: int | None = None) -> tuple[int, int]:
        """Start the web as the Procfile does (`python -m app.server`: the access log, every
        process on the listening socket), on this stack's port, with its processes and
        threads where given, the metrics in multiprocess files as the Procfile keeps them;
        wait. Return the processes and threads per process it runs."""
        metrics = self.workdir / "prometheus-web"
        shutil.rmtree(metrics, ignore_errors=True)
        metrics.mkdir()
        env = {**self.env, "STAPEL_BIND": f"127.0.0.1:{self.port}", MULTIPROC_ENV: str(metrics)}
        for name, value in (("STAPEL_WEB_WORKERS", workers), ("STAPEL_WEB_THREADS", threads)):
            if value is not None:
                env[name] = str(value)
        self._spawn("web", [sys.executable, "-m", "app.server"], env)
        wait(lambda: requests.get(self.url + "/readyz", timeout=2).ok, 60, "web ready")
        config = web_options(env)
        return config["workers"], config["blocking_threads"]

    def start_worker(self, pool: str, concurrency: int, env: dict | None = None) -> None:
        """Start one Celery worker and wait for it to answer a ping."""
        name = f"{pool}-{len(self.procs)}@bench"
        self._spawn(
            name,
            worker_command(pool, name, concurrency),
            {**self.env, "STAPEL_POOL": pool, **(env or {})},
        )
        celery = make_celery(Settings.from_env(self.env))
        wait(
            lambda: celery.control.ping(destination=[name], timeout=0.5),
            120,
            f"worker {name} ready",
        )

    def pids(self, name_prefix: str) -> list[int]:
        """Return the pids of the processes that do the work (the web's: its master's
        children)."""
        proc = next(p for n, p in self.procs.items() if n.startswith(name_prefix))
        kids = children(proc.pid) if name_prefix == "web" else []
        return kids or [proc.pid]

    def cpu(self) -> dict[str, float]:
        """CPU seconds used so far by the web (all its processes), workers and Redis."""
        used: dict[str, float] = {}
        for name, proc in self.procs.items():
            kind, pids = (
                ("web", [proc.pid, *children(proc.pid)])
                if name == "web"
                else ("worker", [proc.pid])
            )
            used[kind] = used.get(kind, 0.0) + sum(map(cpu_seconds, pids))
        if self.redis_pid is not None:
            used["redis"] = cpu_seconds(self.redis_pid)
        return used

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        self.exit.close()
        if sys.exc_info()[0] is not None or os.environ.get(KEEP_ENV):
            print(f"the stack's logs and database are in {self.workdir}", file=sys.stderr)
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)
