"""Celery workers: the app, the tasks and the translation engine."""
