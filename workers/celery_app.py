"""The workers' Celery app: `celery -A workers.celery_app worker -Q cpu,control`."""

from __future__ import annotations

from celery import Celery, signals

from app import logs

celery = Celery("stapel", include=["workers.tasks"], task_cls="workers.request:Task")
celery.config_from_object("celeryconfig")


@signals.setup_logging.connect
def _setup_logging(loglevel=None, **_kwargs) -> None:
    logs.configure(loglevel if isinstance(loglevel, str) else None)


_publisher = None
_tracer = None


@signals.worker_ready.connect
def _start(sender=None, **_kwargs) -> None:
    global _publisher, _tracer
    from workers.runner import start, start_observability

    hostname = getattr(sender, "hostname", None) or "worker"
    _publisher = start(hostname, sender)
    _tracer = start_observability(hostname)


@signals.worker_shutdown.connect
def _stop(**_kwargs) -> None:
    if _tracer is not None:
        _tracer.stop()
    if _publisher is not None:
        _publisher.stop()
