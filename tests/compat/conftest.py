"""A live stack for the compat dialects: the app over real HTTP and a real worker process.

Module-scoped, so a file's client tests share one worker (starting one takes seconds).
"""

from __future__ import annotations

import pytest
import redis as redis_lib
from sqlalchemy import select

from app import create_app
from stapel.db import make_engine
from stapel.keys import create_key
from stapel.tables import Job
from tests.conftest import truncate
from tests.workers_proc import ServerThread, WorkerProcess


@pytest.fixture(scope="module")
def live_overrides(database_url, redis_url, model_root):
    return {
        "database_url": database_url,
        "redis_url": redis_url,
        "model_root": model_root,
        "interactive_timeout_s": 60.0,
    }


@pytest.fixture(scope="module")
def live_app(live_overrides):
    """The app on an emptied database and Redis, for the whole module."""
    engine = make_engine(live_overrides["database_url"])
    truncate(engine)
    engine.dispose()
    client = redis_lib.Redis.from_url(live_overrides["redis_url"])
    client.flushdb()
    application = create_app(live_overrides)
    yield application
    application.extensions["stapel"].dispose()
    client.flushdb()
    client.close()


@pytest.fixture(scope="module")
def live_worker_env() -> dict:
    """Settings of the live worker beyond the stack's (a module may override it)."""
    return {}


@pytest.fixture(scope="module")
def live_worker(live_app, live_overrides, live_worker_env, tmp_path_factory):
    """A worker process translating for the live app."""
    env = {
        "DATABASE_URL": live_overrides["database_url"],
        "REDIS_URL": live_overrides["redis_url"],
        "STAPEL_MODEL_ROOT": str(live_overrides["model_root"]),
        "STAPEL_MAX_DECODING_LENGTH": "24",
        "STAPEL_BATCH_TOKENS": "512",
        **live_worker_env,
    }
    worker = WorkerProcess(env, tmp_path_factory.mktemp("compat-worker"), concurrency=8)
    worker.start(live_app.extensions["stapel"].celery)
    yield worker
    worker.stop()


@pytest.fixture(scope="module")
def live(live_app, live_worker):
    """The served app's base URL, with a worker process translating for it."""
    with ServerThread(live_app) as server:
        yield server.url


@pytest.fixture(scope="module")
def live_key(live_app):
    """A key of tenant `weblate` on the live stack."""
    with live_app.extensions["stapel"].sessions() as s:
        return create_key(s, "weblate")[1]


def compat_jobs(app, api: str) -> list[Job]:
    """Return the stored jobs a dialect made, oldest first."""
    with app.extensions["stapel"].sessions() as s:
        return list(s.scalars(select(Job).where(Job.api == api).order_by(Job.created_at)))
