"""Start and stop real Celery worker processes for tests."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from celery import Celery
from werkzeug.serving import make_server

from tests.factories import wait_for
from workers.command import worker_command

ROOT = Path(__file__).resolve().parent.parent


class WorkerProcess:
    """A `celery worker` subprocess on the test Redis, DB and model root."""

    def __init__(
        self,
        env: dict,
        log_dir: Path,
        pool: str = "cpu",
        concurrency: int = 2,
        name: str | None = None,
    ) -> None:
        self.name = f"{name or pool}-{uuid.uuid4().hex[:6]}@test"
        self.log_path = log_dir / f"{self.name}.log"
        self.env = {**os.environ, **env, "STAPEL_POOL": pool}
        self.args = worker_command(pool, self.name, concurrency) + [
            "--without-gossip",
            "--without-mingle",
        ]
        self.proc: subprocess.Popen | None = None

    def start(self, celery: Celery, timeout: float = 60) -> WorkerProcess:
        """Start the process and wait until it answers a ping."""
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.args, cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT
        )
        wait_for(
            lambda: self.proc.poll() is not None or self.answers(celery),
            timeout=timeout,
            interval=0.3,
            what=f"worker {self.name} to answer pings",
        )
        if self.proc.poll() is not None:
            raise RuntimeError(f"worker exited early; see {self.log_path}:\n{self.log()}")
        return self

    def answers(self, celery: Celery) -> bool:
        replies = celery.control.ping(destination=[self.name], timeout=0.5)
        return any(self.name in reply for reply in replies)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 30) -> None:
        """Warm-stop the worker (SIGTERM), killing it if it does not exit in time."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


class ServerThread:
    """The Flask app served over real HTTP on a free port, in a thread."""

    def __init__(self, app) -> None:
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.server.shutdown()


def stack_worker(app, settings_overrides: dict, tmp_path: Path, **env: str):
    """Start a worker on the app's database, Redis and model root (env added); yield it.

    For a test module's `worker` fixture: `yield from stack_worker(app, ...)`.
    """
    base = {
        "DATABASE_URL": settings_overrides["database_url"],
        "REDIS_URL": settings_overrides["redis_url"],
        "STAPEL_MODEL_ROOT": str(settings_overrides["model_root"]),
    }
    proc = WorkerProcess({**base, **env}, tmp_path).start(app.extensions["stapel"].celery)
    yield proc
    proc.stop()


def _healthy(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    finally:
        conn.close()


@contextmanager
def web_process(env: dict[str, str], port: int, log_path: Path) -> Iterator[subprocess.Popen]:
    """Run the Procfile's web server (app.server) with env on port until the block ends.

    env holds the settings (STAPEL_BIND included); the server's output goes to log_path,
    whose text an assertion shows when the server exits before it answers.
    """
    root = Path(__file__).resolve().parent.parent
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.server"],
            cwd=root,
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        def answers() -> bool:
            try:
                return _healthy(port)
            except OSError:
                return proc.poll() is not None

        try:
            wait_for(answers, timeout=60, what="the web server to answer")
            assert proc.poll() is None, log_path.read_text()
            yield proc
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
