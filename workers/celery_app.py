"""The workers' Celery app: `celery -A workers.celery_app worker -Q cpu,control`."""

from __future__ import annotations

from celery import Celery, signals

from app import logs

celery = Celery("stapel", include=["workers.tasks"])
celery.config_from_object("celeryconfig")


@signals.setup_logging.connect
def _setup_logging(loglevel=None, **_kwargs) -> None:
    logs.configure(loglevel if isinstance(loglevel, str) else None)


_publisher = None


@signals.worker_ready.connect
def _start(sender=None, **_kwargs) -> None:
    global _publisher
    from workers.runner import start

    _publisher = start(getattr(sender, "hostname", None) or "worker", sender)


@signals.worker_shutdown.connect
def _stop(**_kwargs) -> None:
    if _publisher is not None:
        _publisher.stop()
