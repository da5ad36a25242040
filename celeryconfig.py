"""Celery settings of this process, built from its one `Settings` (stapel.celery_config).

`celery -A workers.celery_app` loads this module; the web builds the same dictionary.
"""

from stapel.celery_config import celery_config
from stapel.settings import current

globals().update(celery_config(current()))
