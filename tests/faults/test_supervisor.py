"""`make run`'s supervisor: a process that dies is started again, the others run on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import wait_for
from tests.workers_proc import ROOT

pytestmark = [pytest.mark.fault]


def pids(folder: Path, name: str) -> list[int]:
    path = folder / f"{name}.pids"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def supervised(tmp_path):
    """Start the supervisor on a Procfile of sleepers that write their pids."""
    procfile = tmp_path / "Procfile"
    procfile.write_text(
        "\n".join(
            [
                f"steady: echo $$ >> {tmp_path}/steady.pids && exec sleep 600",
                f"victim: echo $$ >> {tmp_path}/victim.pids && exec sleep 600",
                f"crasher: echo $$ >> {tmp_path}/crasher.pids && exit 3",
                "once: echo done",
            ]
        )
        + "\n"
    )
    log = open(tmp_path / "supervisor.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "stapel.supervisor", "steady", "victim", "crasher", "once"],
        cwd=ROOT,
        env={**os.environ, "STAPEL_PROCFILE": str(procfile), "STAPEL_STOP_GRACE_S": "5"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    yield proc, tmp_path, lambda: (tmp_path / "supervisor.log").read_text()
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for name in ("steady", "victim", "crasher"):
        for pid in pids(tmp_path, name):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    log.close()


def test_a_killed_process_restarts_and_the_others_run_on(supervised):
    proc, folder, output = supervised
    wait_for(
        lambda: pids(folder, "steady") and pids(folder, "victim"),
        timeout=30,
        interval=0.1,
        what="both sleepers to start",
    )
    steady, victim = pids(folder, "steady")[0], pids(folder, "victim")[0]

    os.kill(victim, signal.SIGKILL)
    wait_for(
        lambda: len(pids(folder, "victim")) == 2,
        timeout=30,
        interval=0.1,
        what="the killed process to be started again",
    )
    assert f"victim exited code=-{int(signal.SIGKILL)}" in output()
    assert alive(pids(folder, "victim")[1]) and alive(steady)
    assert pids(folder, "steady") == [steady]

    wait_for(
        lambda: "crasher STOPPED" in output(),
        timeout=60,
        interval=0.2,
        what="the crash loop to be given up, plainly",
    )
    assert len(pids(folder, "crasher")) == 5
    assert "once finished code=0; not restarted" in output()
    assert alive(steady) and proc.poll() is None

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    wait_for(
        lambda: not alive(steady) and not alive(pids(folder, "victim")[1]),
        timeout=10,
        interval=0.1,
        what="the supervisor to stop its processes",
    )
