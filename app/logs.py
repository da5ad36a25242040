"""Logging setup shared by every Stapel process: key=value lines on stderr."""

from __future__ import annotations

import logging
import os

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def configure(level: str | None = None) -> None:
    """Send Stapel's log lines to stderr at STAPEL_LOG_LEVEL (INFO by default)."""
    level = (level or os.environ.get("STAPEL_LOG_LEVEL") or "INFO").upper()
    root = logging.getLogger()
    if not any(getattr(h, "_stapel", False) for h in root.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(FORMAT))
        handler._stapel = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(level)
