"""The command line that starts one Stapel worker, shared by every launcher."""

from __future__ import annotations

import sys


def worker_command(pool: str, name: str, concurrency: int) -> list[str]:
    """Return argv for a Celery worker serving pool (and `control`) under name."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "workers.celery_app",
        "worker",
        "-Q",
        f"{pool},control",
        "-n",
        name,
        "-P",
        "threads",
        "-c",
        str(concurrency),
        "--loglevel",
        "INFO",
    ]
