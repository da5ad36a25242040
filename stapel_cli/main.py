"""`stapel translate FILE... --from en --to de`, `stapel status ID`, `stapel result ID`,
`stapel jobs`, and translation memories: `stapel memory import FILE.tmx --from en --to de`,
`stapel memory list`, `stapel memory export ID [-o FILE]`, `stapel memory delete ID`.
The server and key come from --url/--key or STAPEL_URL/STAPEL_KEY.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TextIO

import requests

DEFAULT_URL = "http://127.0.0.1:8000"
FINAL = ("succeeded", "failed", "cancelled")


class CliError(Exception):
    """An error to print as one line and exit 1 with."""


class Client:
    """The few API calls the command line makes."""

    def __init__(self, url: str, key: str, timeout: float = 30) -> None:
        self.url, self.timeout = url.rstrip("/"), timeout
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {key}"

    def call(self, method: str, path: str, **kwargs) -> requests.Response:
        """Make a request; raise CliError with the server's message on any failure."""
        try:
            response = self.http.request(method, self.url + path, timeout=self.timeout, **kwargs)
        except requests.ConnectionError:
            raise CliError(
                f"cannot connect to {self.url} (is the server running? set --url or STAPEL_URL)"
            ) from None
        except requests.RequestException as exc:
            raise CliError(f"request to {self.url} failed: {exc}") from None
        if response.status_code >= 400:
            try:
                error = response.json()["error"]
                detail = f"{error['message']} ({error['code']})"
            except (ValueError, KeyError, TypeError):
                detail = response.text[:200] or response.reason
            raise CliError(f"HTTP {response.status_code}: {detail}")
        return response

    def submit(self, files: list[Path], source: str, target: str, priority: int) -> dict:
        handles = [(f, f.open("rb")) for f in files]
        try:
            return self.call(
                "POST",
                "/v1/jobs",
                data={"source_lang": source, "target_lang": target, "priority": str(priority)},
                files=[("files", (f.name, h, "text/plain")) for f, h in handles],
            ).json()
        finally:
            for _, handle in handles:
                handle.close()

    def job(self, job_id: str) -> dict:
        return self.call("GET", f"/v1/jobs/{job_id}").json()

    def result(self, job_id: str) -> dict:
        return self.call("GET", f"/v1/jobs/{job_id}/result").json()

    def import_memory(self, path: Path, source: str, target: str, name: str | None) -> dict:
        fields = {"source_lang": source, "target_lang": target, **({"name": name} if name else {})}
        with path.open("rb") as handle:
            return self.call(
                "POST",
                "/v1/memories",
                data=fields,
                files=[("file", (path.name, handle, "application/x-tmx+xml"))],
            ).json()

    def memories(self) -> dict:
        return self.call("GET", "/v1/memories").json()

    def export_memory(self, memory_id: str, out: BinaryIO) -> None:
        response = self.call("GET", f"/v1/memories/{memory_id}/tmx", stream=True)
        for block in response.iter_content(65536):
            out.write(block)

    def delete_memory(self, memory_id: str) -> None:
        self.call("DELETE", f"/v1/memories/{memory_id}")

    def jobs(self, status: str | None, limit: int) -> dict:
        params = {"limit": limit, **({"status": status} if status else {})}
        return self.call("GET", "/v1/jobs", params=params).json()


RATE_AFTER_S = 0.5
"""No rate is shown over less than this: a job answered at once would show millions a second."""


def progress_line(
    done: int, total: int, elapsed_s: float, width: int = 30, done_at_start: int = 0
) -> str:
    """Return `[#####.....] 120/400 segments 35.2/s ETA 8s` for the progress display.

    The rate counts the segments done while the command watched (`done_at_start` were done
    before), and is left out until RATE_AFTER_S have passed or when none were.
    """
    fraction = done / total if total else 1.0
    filled = int(width * fraction)
    watched = done - done_at_start
    rate = watched / elapsed_s if elapsed_s >= RATE_AFTER_S and watched > 0 else None
    if done >= total:
        eta = "done"
    elif rate:
        eta = f"ETA {int((total - done) / rate)}s"
    else:
        eta = "ETA ?"
    shown = f" {rate:.1f}/s" if rate else ""
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} segments{shown} {eta}"


def wait(
    client: Client,
    job: dict,
    out: TextIO,
    interval_s: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
) -> dict:
    """Poll the job until it ends, rewriting one progress line on out."""
    started, done_at_start = clock(), job["segments_done"]
    while True:
        line = progress_line(
            job["segments_done"],
            job["segments_total"],
            clock() - started,
            done_at_start=done_at_start,
        )
        out.write("\r" + line)
        out.flush()
        if job["status"] in FINAL:
            out.write("\n")
            return job
        time.sleep(interval_s)
        job = client.job(job["id"])


def output_path(source: Path, target_lang: str) -> Path:
    """Return where a file's translation goes: chapter1.txt -> chapter1.de.txt."""
    return source.with_name(f"{source.stem}.{target_lang}{source.suffix or '.txt'}")


def cmd_translate(client: Client, args: argparse.Namespace) -> int:
    files = [Path(f) for f in args.files]
    for path in files:
        if not path.is_file():
            raise CliError(f"no such file: {path}")
    job = client.submit(files, args.source, args.target, args.priority)
    print(
        f"job {job['id']} {job['status']}: {len(files)} file(s), {job['segments_total']} segments",
        file=sys.stderr,
    )
    job = wait(client, job, sys.stderr, args.interval)
    if job["status"] != "succeeded":
        raise CliError(f"job {job['id']} {job['status']}: {job.get('error') or 'no result'}")
    documents = client.result(job["id"])["documents"]
    for path, document in zip(files, documents, strict=True):
        target = output_path(path, args.target)
        target.write_text("".join((s or "") + "\n" for s in document["segments"]), encoding="utf-8")
        print(target)
    return 0


def cmd_status(client: Client, args: argparse.Namespace) -> int:
    job = client.job(args.job_id)
    print(
        json.dumps(job, indent=2)
        if args.json
        else f"{job['id']} {job['status']} {job['segments_done']}/{job['segments_total']} "
        f"segments {job['source_lang']}-{job['target_lang']} created {job['created_at']}"
        + (f" error: {job['error']}" if job.get("error") else "")
    )
    return 0


def cmd_result(client: Client, args: argparse.Namespace) -> int:
    result = client.result(args.job_id)
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return 0
    if not result["complete"]:
        print(
            f"job {result['id']} is {result['status']}: partial result "
            f"({result['segments_done']}/{result['segments_total']})",
            file=sys.stderr,
        )
    for document in result["documents"]:
        if len(result["documents"]) > 1:
            print(f"# {document['id'] or ''}")
        for segment in document["segments"]:
            print(segment if segment is not None else "")
    return 0


def cmd_jobs(client: Client, args: argparse.Namespace) -> int:
    for job in client.jobs(args.status, args.limit)["jobs"]:
        print(
            f"{job['id']}  {job['status']:<9}  {job['segments_done']:>7}/"
            f"{job['segments_total']:<7}  {job['source_lang']}-{job['target_lang']}  "
            f"{job['created_at']}"
        )
    return 0


def cmd_memory_import(client: Client, args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        raise CliError(f"no such file: {path}")
    memory = client.import_memory(path, args.source, args.target, args.name)
    pair = f"{memory['source_lang']}-{memory['target_lang']}"
    print(f"{memory['id']}  {memory['entries']} units  {pair}")
    return 0


def cmd_memory_list(client: Client, args: argparse.Namespace) -> int:
    for memory in client.memories()["memories"]:
        print(
            f"{memory['id']}  {memory['source_lang']}-{memory['target_lang']}  "
            f"{memory['entries']:>8} units  {memory['created_at']}  {memory['name'] or ''}"
        )
    return 0


def cmd_memory_export(client: Client, args: argparse.Namespace) -> int:
    if args.output in (None, "-"):
        client.export_memory(args.memory_id, sys.stdout.buffer)
        return 0
    target = Path(args.output)
    partial = target.with_name(target.name + ".part")
    try:
        with partial.open("wb") as out:
            client.export_memory(args.memory_id, out)
        partial.replace(target)  # a file is there whole or not at all
    finally:
        partial.unlink(missing_ok=True)
    print(target)
    return 0


def cmd_memory_delete(client: Client, args: argparse.Namespace) -> int:
    client.delete_memory(args.memory_id)
    print(f"deleted {args.memory_id}")
    return 0


def _memory_parser(commands) -> None:
    memory = commands.add_parser("memory", help="translation memories (TMX)")
    actions = memory.add_subparsers(dest="action", required=True)
    imported = actions.add_parser("import", help="import a TMX file as a new memory")
    imported.add_argument("file", metavar="FILE")
    imported.add_argument("--from", dest="source", required=True, help="source language")
    imported.add_argument("--to", dest="target", required=True, help="target language")
    imported.add_argument("--name", help="a name to list it by")
    imported.set_defaults(run=cmd_memory_import)
    actions.add_parser("list", help="list your memories").set_defaults(run=cmd_memory_list)
    exported = actions.add_parser("export", help="download a memory as TMX")
    exported.add_argument("memory_id", metavar="ID")
    exported.add_argument("-o", "--output", help="file to write (default: standard output)")
    exported.set_defaults(run=cmd_memory_export)
    deleted = actions.add_parser("delete", help="delete a memory")
    deleted.add_argument("memory_id", metavar="ID")
    deleted.set_defaults(run=cmd_memory_delete)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="stapel", description="Stapel translation client.")
    top.add_argument(
        "--url",
        default=os.environ.get("STAPEL_URL", DEFAULT_URL),
        help="server URL (STAPEL_URL; default %(default)s)",
    )
    top.add_argument("--key", default=os.environ.get("STAPEL_KEY"), help="API key (STAPEL_KEY)")
    commands = top.add_subparsers(dest="command", required=True)
    translate = commands.add_parser("translate", help="translate .txt files, wait, save")
    translate.add_argument("files", nargs="+", metavar="FILE")
    translate.add_argument("--from", dest="source", required=True, help="source language")
    translate.add_argument("--to", dest="target", required=True, help="target language")
    translate.add_argument("--priority", type=int, default=5, help="0-9, 9 most urgent")
    translate.add_argument("--interval", type=float, default=0.5, help=argparse.SUPPRESS)
    translate.set_defaults(run=cmd_translate)
    for name, run, text in (
        ("status", cmd_status, "show a job"),
        ("result", cmd_result, "print a job's translation"),
    ):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("job_id", metavar="ID")
        sub.add_argument("--json", action="store_true", help="print the JSON answer")
        sub.set_defaults(run=run)
    listing = commands.add_parser("jobs", help="list your jobs, newest first")
    listing.add_argument("--status")
    listing.add_argument("--limit", type=int, default=20)
    listing.set_defaults(run=cmd_jobs)
    _memory_parser(commands)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = parser().parse_args(argv)
    if not args.key:
        print("stapel: error: no API key (use --key or STAPEL_KEY)", file=sys.stderr)
        return 2
    try:
        with contextlib.suppress(BrokenPipeError):
            return args.run(Client(args.url, args.key), args)
        return 0
    except CliError as exc:
        print(f"stapel: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nstapel: interrupted", file=sys.stderr)
        return 130
