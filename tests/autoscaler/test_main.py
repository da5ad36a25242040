"""`python -m autoscaler` as a process: dry-run decisions, clean exit on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.autoscaler.rows import add_chunks
from tests.factories import wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_dry_run_process_decides_and_stops_on_sigterm(database_url, redis_url, session, tmp_path):
    add_chunks(session, "cpu", [("queued", None)] * 3)
    log = tmp_path / "autoscaler.log"
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "STAPEL_AUTOSCALER_BACKEND": "dry-run",
        "STAPEL_CPU_POLL_S": "0.2",
        "STAPEL_GPU_MAX": "0",
    }
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "autoscaler"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(
                lambda: "dry-run would scale pool=cpu from=1 to=4" in log.read_text(),
                timeout=20,
                what="a dry-run scale-up",
            )
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = log.read_text()
    assert "pools=cpu" in text and "autoscaler stopped" in text
