"""Stamp a bench result with where and how it was measured, and write it.

Every bench that writes JSON calls `write_run`: the result gets a `stamp` object with the
commit (and whether the tree had changes), the UTC time, the CPU and its cores, the
versions of the libraries that set the figures, and the command line. Runs go to
bench/runs/ (not committed); bench/results/ holds one promoted baseline per bench,
which `python -m bench.compare` sets a run against.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "bench" / "runs"
BASELINES = ROOT / "bench" / "results"

LIBRARIES = (
    "ctranslate2",
    "sentencepiece",
    "celery",
    "kombu",
    "redis",
    "sqlalchemy",
    "psycopg",
    "flask",
    "granian",
)
"""Distributions whose version can move a figure; one not installed is recorded as None."""


def run_path(name: str) -> Path:
    """Where a bench writes the run called `name` by default."""
    return RUNS / f"{name}.json"


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def stamp(argv: list[str] | None = None) -> dict[str, Any]:
    """Describe this run: commit, dirty tree, UTC time, CPU, libraries, command line."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": _git("rev-parse", "--short=12", "HEAD"),
        "dirty": None if status is None else bool(status),
        "utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "libraries": {name: _version(name) for name in LIBRARIES},
        "command": [Path(sys.executable).name, *(sys.argv if argv is None else argv)],
    }


def write_run(path: Path, results: dict[str, Any], argv: list[str] | None = None) -> Path:
    """Write `results` with its stamp as JSON to `path`, creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"stamp": stamp(argv), **results}, indent=2) + "\n")
    return path
