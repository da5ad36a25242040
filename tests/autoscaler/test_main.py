"""`python -m autoscaler` as a process: dry-run decisions, clean exit on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.autoscaler.rows import add_chunks
from tests.factories import wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.process
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


@pytest.mark.process
def test_help_prints_the_usage_and_exits_without_starting(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "autoscaler", "--help"],
        cwd=ROOT,
        env={**os.environ, "STAPEL_AUTOSCALER_BACKEND": "dry-run"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m autoscaler")
    assert "STAPEL_AUTOSCALER_BACKEND" in proc.stdout
    assert "autoscaler started" not in proc.stdout + proc.stderr


def test_an_unmigrated_database_is_named_in_the_warning(tmp_path, caplog):
    from autoscaler.backends.dry_run import DryRunBackend
    from autoscaler.config import AutoscalerSettings
    from autoscaler.loop import PoolLoop
    from stapel.db import make_engine, make_session_factory

    pool = AutoscalerSettings.from_env({}).pool("cpu")
    empty = make_session_factory(make_engine(f"sqlite:///{tmp_path / 'empty.db'}"))
    loop = PoolLoop(pool, DryRunBackend("cpu", 1), empty, None)
    assert loop.tick() is None
    assert (
        "database unavailable, skipping this tick pool=cpu error=OperationalError: " in caplog.text
    )
    assert "no such table: chunks" in caplog.text
