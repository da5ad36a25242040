"""The HTTP API: the blueprints, with their routes registered by importing the modules."""

from __future__ import annotations

from app.api import jobs, memories, meta, progress
from app.api.blueprints import health, v1

__all__ = ["health", "jobs", "memories", "meta", "progress", "v1"]
