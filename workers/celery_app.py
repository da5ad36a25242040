"""The workers' Celery app: `celery -A workers.celery_app worker -Q cpu,control`.

The app is made here and handed to what needs it (tasks get it as `self.app`, the
runtime at start-up); nothing in workers/ imports it back except the task module.
"""

from __future__ import annotations

from celery import Celery, signals

from stapel import logs
from stapel.gc_freeze import freeze_start_up
from stapel.settings import current
from workers.runtime import Runtime

celery = Celery("stapel", include=["workers.tasks"], task_cls="workers.request:Task")
celery.config_from_object("celeryconfig")  # stapel.celery_config, from this process's Settings

_runtime: Runtime | None = None


@signals.setup_logging.connect
def _setup_logging(loglevel=None, **_kwargs) -> None:
    logs.configure(current(), loglevel if isinstance(loglevel, str) else None)


@signals.worker_ready.connect
def _start(sender=None, **_kwargs) -> None:
    global _runtime
    freeze_start_up("worker")  # before any model loads: models come and go (evictions)
    _runtime = Runtime(celery, getattr(sender, "hostname", None) or "worker")
    _runtime.start(sender)


@signals.worker_shutdown.connect
def _stop(**_kwargs) -> None:
    if _runtime is not None:
        _runtime.stop()
