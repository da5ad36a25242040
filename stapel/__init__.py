"""Stapel's core: what the web (`app/`) and the workers (`workers/`) both stand on.

No Flask and no Celery worker code in here: settings, the database and its tables, job
and chunk states, the submit use case, dispatch, chunks, the watchdog, callbacks,
quotas, the broker, presence, metrics and logs.
"""
