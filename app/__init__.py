"""Stapel's web app: `flask --app app run`, or `python -m app.server` (the Procfile's:
granian serving `serve()`).

`create_app` and `serve` live in app.factory and are imported on first use, so that
importing the package (app.server's master process does, and holds no app) stays light.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app", "serve"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from app import factory

        return getattr(factory, name)
    raise AttributeError(f"module 'app' has no attribute {name!r}")
