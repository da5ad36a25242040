"""Logging setup shared by every Stapel process.

Console: readable key=value lines on stderr (JSON lines with STAPEL_LOG_JSON=1).
Files, only when STAPEL_LOG_DIR is set (`make run` sets var/log): `stapel.log` (INFO and
up), `stapel.log.wf` (WARNING and up) and `stapel.tracer` (the periodic metrics blocks
of stapel/tracer.py). Every line gets the context it was logged in: `request_id=` inside an
HTTP request, `logid=` (and `chunk=`) while a job or chunk is being worked on, unless the
message already names them. API keys and bearer tokens are masked on every line.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import logging.handlers
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stapel.settings import Settings

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s%(context)s"
TRACER_LOGGER = "stapel.tracer"
"""The logger whose lines go to the `stapel.tracer` file (and nowhere else)."""

_job: contextvars.ContextVar[tuple[str, int | None] | None] = contextvars.ContextVar(
    "stapel_job", default=None
)
_SECRET = re.compile(r"(stp_)[A-Za-z0-9_\-]{4,}|(Bearer\s+)\S+")
_LOGID = re.compile(r"\blogid=(\S+)")
_CHUNK = re.compile(r"\bchunk=(\d+)")


def _mask(match: re.Match) -> str:
    return (match.group(1) or match.group(2)) + "***"


def mask_secrets(text: str) -> str:
    """The text with API keys and bearer tokens masked, as on every log line."""
    return _SECRET.sub(_mask, text)


@contextlib.contextmanager
def job_context(job_id: str, chunk: int | None = None) -> Iterator[None]:
    """Stamp every line logged inside the block with logid=job_id (and chunk=)."""
    token = _job.set((job_id, chunk))
    try:
        yield
    finally:
        _job.reset(token)


RequestContext = Callable[[], tuple[str | None, str | None]]
"""Returns (request id, job id named by the request) inside a request, else (None, None)."""


def _no_request() -> tuple[str | None, str | None]:
    return None, None


_request_context: RequestContext = _no_request


def set_request_context(provider: RequestContext) -> None:
    """Let the web stamp its lines with the request's id (the core knows no HTTP)."""
    global _request_context
    _request_context = provider


class ContextFilter(logging.Filter):
    """Add `context` (request_id, logid, chunk) to a record and mask secrets."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_secrets(message)
        if masked != message:
            record.msg, record.args = masked, None
            message = masked
        request_id, url_job = _request_context()
        job = _job.get()
        fields: dict[str, str] = {}
        if request_id:
            fields["request_id"] = request_id
        job_id = job[0] if job else url_job
        if job_id and "logid=" not in message:
            fields["logid"] = job_id
        if job and job[1] is not None and "chunk=" not in message:
            fields["chunk"] = str(job[1])
        record.context = "".join(f" {k}={v}" for k, v in fields.items())
        record.stapel = fields
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, request_id, logid, chunk."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        body = {
            "ts": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": message,
        }
        body.update(getattr(record, "stapel", {}))
        for key, pattern in (("logid", _LOGID), ("chunk", _CHUNK)):
            if key not in body and (found := pattern.search(message)):
                body[key] = found.group(1)
        if record.exc_info:
            body["exc"] = self.formatException(record.exc_info)
        return json.dumps(body, ensure_ascii=False)


def _formatter(json_lines: bool) -> logging.Formatter:
    return JsonFormatter() if json_lines else logging.Formatter(FORMAT)


def _handler(handler: logging.Handler, level: int, json_lines: bool) -> logging.Handler:
    handler.setLevel(level)
    handler.setFormatter(_formatter(json_lines))
    handler.addFilter(ContextFilter())
    handler._stapel = True  # type: ignore[attr-defined]
    return handler


def configure(settings: Settings, level: str | None = None) -> None:
    """Set up Stapel's handlers once per process (later calls only change the level).

    level defaults to STAPEL_LOG_LEVEL; files are written under STAPEL_LOG_DIR when set.
    """
    level = (level or settings.log_level).upper()
    json_lines, log_dir = settings.log_json, settings.log_dir
    root = logging.getLogger()
    root.setLevel(level)
    if any(getattr(h, "_stapel", False) for h in root.handlers):
        return
    root.addHandler(_handler(logging.StreamHandler(), logging.NOTSET, json_lines))
    if log_dir:
        add_file_handlers(Path(log_dir), json_lines=json_lines)


def add_file_handlers(log_dir: Path, *, json_lines: bool = False) -> None:
    """Write stapel.log (INFO+), stapel.log.wf (WARNING+) and stapel.tracer under log_dir.

    WatchedFileHandler reopens a file that logrotate moved, and several processes may
    append to the same files (each line is one write).
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    root.addHandler(
        _handler(
            logging.handlers.WatchedFileHandler(log_dir / "stapel.log"), logging.INFO, json_lines
        )
    )
    root.addHandler(
        _handler(
            logging.handlers.WatchedFileHandler(log_dir / "stapel.log.wf"),
            logging.WARNING,
            json_lines,
        )
    )
    tracer = logging.getLogger(TRACER_LOGGER)
    tracer.propagate = False
    tracer.setLevel(logging.INFO)
    handler = logging.handlers.WatchedFileHandler(log_dir / "stapel.tracer")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    tracer.addHandler(handler)
