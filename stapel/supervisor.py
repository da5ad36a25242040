"""`make run`'s process runner: the Procfile's processes, each restarted when it dies.

`python -m stapel.supervisor web worker_control beat ...` starts the named Procfile lines
(each with `sh -c`, in its own process group) and prefixes their output with the name.
A process that exits with an error or a signal is started again after a pause that
doubles up to BACKOFF_MAX_S (reset once it ran STEADY_S); one that fails MAX_QUICK_FAILS
times in a row within STEADY_S of starting is left stopped, and the supervisor says so.
A process that exits with 0 finished its work and is not started again. Nothing that one
process does stops the others (honcho, the usual Procfile runner, stops every process
when one exits). SIGINT or SIGTERM stops them all: SIGTERM to each group, then
SIGKILL after STOP_GRACE_S.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 30.0
STEADY_S = 60.0
"""A process that ran this long is healthy: its next failure starts a new count."""
MAX_QUICK_FAILS = 5
STOP_GRACE_S = float(os.environ.get("STAPEL_STOP_GRACE_S", "30"))
"""How long a stop waits for warm shutdowns (Celery finishes its running tasks)."""


def read_procfile(path: Path) -> dict[str, str]:
    """Return name -> command of each `name: command` line."""
    lines = {}
    for raw in path.read_text().splitlines():
        name, sep, command = raw.partition(":")
        if sep and name.strip() and not raw.startswith("#"):
            lines[name.strip()] = command.strip()
    return lines


@dataclass
class Output:
    """The supervisor's stdout, one whole line per write, each with its process name."""

    stream: IO[str]
    width: int
    lock: threading.Lock

    def line(self, name: str, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        with self.lock:
            self.stream.write(f"{stamp} {name.ljust(self.width)} | {text}\n")
            self.stream.flush()


class Keeper:
    """Runs one Procfile line and starts it again when it dies, until told to stop."""

    def __init__(self, name: str, command: str, out: Output, stopping: threading.Event) -> None:
        self.name, self.command, self.out, self.stopping = name, command, out, stopping
        self.proc: subprocess.Popen[bytes] | None = None
        self.thread = threading.Thread(target=self._run, name=f"keep-{name}", daemon=True)

    def _start(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            ["sh", "-c", self.command],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.out.line("system", f"{self.name} started pid={proc.pid}")
        return proc

    def _pump(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            self.out.line(self.name, raw.decode(errors="replace").rstrip("\n"))

    def _run(self) -> None:
        backoff, quick_fails = BACKOFF_START_S, 0
        while not self.stopping.is_set():
            started = time.monotonic()
            self.proc = self._start()
            self._pump(self.proc)
            code = self.proc.wait()
            if self.stopping.is_set():
                break
            if code == 0:
                self.out.line("system", f"{self.name} finished code=0; not restarted")
                return
            if time.monotonic() - started >= STEADY_S:
                backoff, quick_fails = BACKOFF_START_S, 0
            quick_fails += 1
            if quick_fails >= MAX_QUICK_FAILS:
                self.out.line(
                    "system",
                    f"{self.name} STOPPED: exited code={code} {quick_fails} times in a row "
                    f"within {STEADY_S:.0f}s of starting; not restarted (the others run on)",
                )
                return
            self.out.line("system", f"{self.name} exited code={code}; restarting in {backoff:.0f}s")
            if self.stopping.wait(backoff):
                break
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass


def supervise(procfile: Path, names: list[str]) -> int:
    """Run the named lines until SIGINT or SIGTERM; return the exit status."""
    lines = read_procfile(procfile)
    unknown = [n for n in names if n not in lines]
    if unknown:
        print(f"not in {procfile}: {' '.join(unknown)}", file=sys.stderr)
        return 2
    stopping = threading.Event()
    out = Output(sys.stdout, max(len(n) for n in [*names, "system"]), threading.Lock())
    keepers = [Keeper(n, lines[n], out, stopping) for n in names]
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    for keeper in keepers:
        keeper.thread.start()
    while not stopping.wait(0.5):
        if not any(k.thread.is_alive() for k in keepers):
            out.line("system", "every process has ended")
            return 1
    out.line("system", f"stopping: SIGTERM to all, SIGKILL after {STOP_GRACE_S:.0f}s")
    for keeper in keepers:
        keeper.signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for keeper in keepers:
        keeper.thread.join(max(0.0, deadline - time.monotonic()))
    for keeper in keepers:
        keeper.signal(signal.SIGKILL)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    procfile = Path(os.environ.get("STAPEL_PROCFILE", "Procfile"))
    if not args:
        args = list(read_procfile(procfile))
    return supervise(procfile, args)


if __name__ == "__main__":
    sys.exit(main())
