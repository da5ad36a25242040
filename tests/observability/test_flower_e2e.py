"""Flower on a running stack: its pages list the worker and a finished chunk task,
driven by headless Chromium (screenshots kept under the test's tmp dir)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import requests

from tests.conftest import ROOT, free_port
from tests.factories import job_body, wait_for
from tests.workers_proc import WorkerProcess

pytestmark = pytest.mark.e2e

AUTH = ("ops", "s3cret-pass")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium, installed with apt-get when missing (root only), else a skip."""
    found = shutil.which("chromium")
    if found:
        return found
    if not shutil.which("apt-get") or os.geteuid() != 0:
        pytest.skip("chromium is not installed and apt-get as root is not available")
    done = subprocess.run(
        ["apt-get", "install", "-y", "chromium"], capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0 or not shutil.which("chromium"):
        pytest.skip(f"apt-get install chromium failed: {done.stderr[-300:]}")
    return shutil.which("chromium")


def browse(chromium: str, url: str, profile, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            chromium,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            "--virtual-time-budget=5000",
            *extra,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def flower(settings_overrides, tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "REDIS_URL": settings_overrides["redis_url"],
        "DATABASE_URL": settings_overrides["database_url"],
    }
    log = open(tmp_path / "flower.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "workers.celery_app",
            "flower",
            "--address=127.0.0.1",
            f"--port={port}",
            f"--basic-auth={AUTH[0]}:{AUTH[1]}",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"127.0.0.1:{port}"

    def up():
        assert proc.poll() is None, (tmp_path / "flower.log").read_text()
        try:
            return requests.get(f"http://{url}/healthcheck", timeout=2).ok
        except requests.ConnectionError:
            return False

    try:
        wait_for(up, timeout=60, interval=0.3, what="flower to answer")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_flower_lists_the_worker_and_its_finished_task(
    app, client, auth, flower, chromium, settings_overrides, tmp_path
):
    env = {
        "DATABASE_URL": settings_overrides["database_url"],
        "REDIS_URL": settings_overrides["redis_url"],
        "STAPEL_MODEL_ROOT": str(settings_overrides["model_root"]),
        "STAPEL_MAX_DECODING_LENGTH": "8",
    }
    worker = WorkerProcess(env, tmp_path).start(app.extensions["stapel"].celery)
    try:
        job_id = client.post("/v1/jobs", json=job_body(), headers=auth).get_json()["id"]
        wait_for(
            lambda: (
                client.get(f"/v1/jobs/{job_id}", headers=auth).get_json()["status"] == "succeeded"
            ),
            timeout=60,
            what="the job to succeed",
        )
        base = f"http://{flower}"
        assert requests.get(f"{base}/workers", timeout=10).status_code == 401

        def task_listed():
            tasks = requests.get(f"{base}/api/tasks", auth=AUTH, timeout=10).json()
            return [
                t
                for t in tasks.values()
                if t["name"] == "stapel.translate_chunk"
                and t["state"] == "SUCCESS"
                and t["worker"] == worker.name
            ]

        (task,) = wait_for(task_listed, timeout=30, what="flower to see the finished task")
        workers = requests.get(
            f"{base}/api/workers", params={"refresh": 1}, auth=AUTH, timeout=30
        ).json()
        assert worker.name in workers

        credentials = f"http://{AUTH[0]}:{AUTH[1]}@{flower}"
        page = browse(chromium, f"{credentials}/workers", tmp_path / "p1", "--dump-dom")
        assert worker.name in page.stdout, page.stderr[-2000:]
        tasks_page = browse(chromium, f"{credentials}/tasks", tmp_path / "p2", "--dump-dom")
        assert task["uuid"] in tasks_page.stdout and "stapel.translate_chunk" in tasks_page.stdout
        shot = tmp_path / "flower-tasks.png"
        browse(
            chromium,
            f"{credentials}/tasks",
            tmp_path / "p3",
            f"--screenshot={shot}",
            "--window-size=1400,900",
        )
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        print(f"screenshot: {shot}")
    finally:
        worker.stop()
