"""The web app's factories: `create_app` (tests, `flask --app app ...`) and `serve` (the
app of a serving process, made by app.server's processes)."""

from __future__ import annotations

from collections.abc import Callable

import redis
from flask import Flask
from flask.json.provider import DefaultJSONProvider

from app.access_log import AccessLog
from app.api import errors, health, v1
from app.api.openapi import docs
from app.body_guard import BodyGuard
from app.cli import register as register_cli
from app.compat import register as register_compat
from app.limits import init_limits
from app.page import page
from app.parse_slots import ParseSlots
from app.server import app_threads
from app.web import Stapel, assign_request_id, close_session, echo_request_id, request_context
from stapel import logs
from stapel.broker import make_celery
from stapel.db import make_engine, make_reader, make_session_factory
from stapel.gc_freeze import freeze_start_up
from stapel.metrics import web_registry
from stapel.presence import ServedQueues
from stapel.settings import Settings


class OrderedJSON(DefaultJSONProvider):
    """Flask's JSON, with keys in the order the code writes them."""

    sort_keys = False


class App(Flask):
    """Flask, asking once per function whether it must be run as a coroutine."""

    json_provider_class = OrderedJSON

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._sync: dict[Callable, Callable] = {}

    def ensure_sync(self, func: Callable) -> Callable:
        """Flask's answer, kept: Flask asks for every hook and the view of every request,
        and each time inspects the function's code flags (seven times a status read)."""
        sync = self._sync.get(func)
        if sync is None:
            sync = self._sync[func] = super().ensure_sync(func)
        return sync


def create_app(overrides: dict | None = None) -> Flask:
    """Create the Flask app; overrides replace settings read from the environment."""
    settings = Settings.from_env()
    if overrides:
        settings = settings.replace(**overrides)
    logs.configure(settings)
    logs.set_request_context(request_context)
    app = App(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
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
        parse_slots=ParseSlots(settings.parse_slots, settings.parse_slots_per_tenant),
    )
    app.before_request(assign_request_id)
    app.before_request(errors.refuse_long_targets)
    app.after_request(echo_request_id)
    app.teardown_appcontext(close_session)
    errors.register(app)
    app.register_blueprint(v1)
    app.register_blueprint(health)
    app.register_blueprint(docs)
    app.register_blueprint(page)
    register_cli(app)
    init_limits(app, settings.redis_url, settings.rate_submit, settings.rate_read)
    register_compat(app)
    return app


def serve() -> Flask:
    """The app for a serving process (app.server's factory, the Procfile's): create_app, its
    request bodies read by app.body_guard, its access log (app.access_log), then the
    objects of start-up frozen out of the garbage collector's passes (stapel.gc_freeze)."""
    app = create_app()
    settings = app.extensions["stapel"].settings
    guarded = BodyGuard(
        app.wsgi_app,
        max_body_bytes=settings.max_body_bytes,
        deadline_s=settings.body_deadline_s,
        min_rate=settings.body_min_rate,
        # an address may keep all but one of the process's app threads waiting, never all
        per_address=min(settings.body_reads_per_address, max(1, app_threads() - 1)),
    )
    app.wsgi_app = AccessLog(guarded)  # type: ignore[method-assign]
    freeze_start_up("web")
    return app
