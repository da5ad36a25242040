"""Stapel's web app: `flask --app app run` or `gunicorn 'app:serve()'` (the Procfile's)."""

from __future__ import annotations

import gc
import logging

import redis
from flask import Flask

from app import cli, compat
from app.api import errors, health, v1
from app.api.openapi import docs
from app.limits import init_limits
from app.page import page
from app.web import Stapel, assign_request_id, close_session, echo_request_id, request_context
from stapel import logs
from stapel.broker import make_celery
from stapel.db import make_engine, make_reader, make_session_factory
from stapel.metrics import web_registry
from stapel.presence import ServedQueues
from stapel.settings import Settings

log = logging.getLogger(__name__)


def create_app(overrides: dict | None = None) -> Flask:
    """Create the Flask app; overrides replace settings read from the environment."""
    settings = Settings.from_env()
    if overrides:
        settings = settings.replace(**overrides)
    logs.configure(settings)
    logs.set_request_context(request_context)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.json.sort_keys = False
    engine = make_engine(settings.database_url)
    sessions = make_session_factory(engine)
    client = redis.Redis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=2)
    app.extensions["stapel"] = Stapel(
        settings=settings,
        engine=engine,
        reader=make_reader(engine),
        sessions=sessions,
        celery=make_celery(settings),
        redis=client,
        served=ServedQueues(client),
        metrics=web_registry(sessions, client),
    )
    app.before_request(assign_request_id)
    app.after_request(echo_request_id)
    app.teardown_appcontext(close_session)
    errors.register(app)
    errors.json_gunicorn_errors()
    app.register_blueprint(v1)
    app.register_blueprint(health)
    app.register_blueprint(docs)
    app.register_blueprint(page)
    cli.register(app)
    init_limits(app, settings.redis_url, settings.rate_submit, settings.rate_read)
    compat.register(app)
    return app


def serve() -> Flask:
    """The app for a serving process (gunicorn's factory): create_app, then the objects of
    start-up frozen out of the cyclic garbage collector's reach.

    A web process holds about 120,000 objects once the app is made (imports, SQLAlchemy's
    and Flask's tables), nearly all alive until the process ends, and every full
    collection walked them all: 45-110 ms with the GIL held, every request of the process
    stalled, about every 10 s per process under load (docs/performance.md, 2026-12-05).
    Frozen (gc.freeze), they are left out of every collection: a full one takes 1-2 ms.
    Only for a process that serves until it ends: tests make many apps in one process,
    and frozen objects are never collected as cyclic garbage.
    """
    app = create_app()
    gc.collect()  # start-up's own garbage is collected, not frozen
    gc.freeze()
    log.info("start-up objects frozen out of the garbage collector: %d", gc.get_freeze_count())
    return app
