"""A server database's pooled connections: pinged when taken after lying idle, not in
steady use, a connection lost while idle replaced before anyone uses it; one-statement
reads in autocommit there (stapel.db.make_reader)."""

from __future__ import annotations

import socket
import threading

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from stapel import db
from stapel.db import make_engine


@pytest.fixture
def pg_engine(postgres_url):
    engine = make_engine(postgres_url)
    pings: list[int] = []
    real_ping = engine.dialect.do_ping

    def counted(dbapi_conn):
        pings.append(1)
        return real_ping(dbapi_conn)

    engine.dialect.do_ping = counted  # the real ping, counted
    yield engine, pings
    engine.dispose()


def _backend(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(text("SELECT pg_backend_pid()")).scalar_one()


def test_a_connection_in_steady_use_is_not_pinged(pg_engine):
    engine, pings = pg_engine
    first = _backend(engine)
    assert [_backend(engine) for _ in range(5)] == [first] * 5  # the same pooled one
    assert pings == []


def test_a_connection_lost_while_idle_is_replaced_at_checkout(pg_engine, monkeypatch):
    engine, pings = pg_engine
    lost = _backend(engine)
    with make_engine(engine.url.render_as_string(hide_password=False)).connect() as other:
        assert other.execute(text("SELECT pg_terminate_backend(:p)"), {"p": lost}).scalar()
        other.commit()
    monkeypatch.setattr(db, "PING_IDLE_S", 0.0)  # every pooled connection counts as idle
    replaced = _backend(engine)  # no error reaches the caller: the ping found it gone
    assert replaced != lost
    assert pings  # it was the ping that found it


def test_a_read_in_autocommit_leaves_no_transaction_open(pg_engine):
    engine, _ = pg_engine
    reader = db.make_reader(engine)
    with reader.connect() as conn:
        conn.execute(text("SELECT 1"))
        # no BEGIN was sent: the server sees the session idle, not idle in a transaction
        raw = conn.connection.dbapi_connection
        assert raw.info.transaction_status.name == "IDLE"
    with engine.connect() as conn:  # the plain engine still begins one
        conn.execute(text("SELECT 1"))
        assert conn.connection.dbapi_connection.info.transaction_status.name == "INTRANS"


def test_sqlite_reads_keep_the_engine(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'r.db'}")
    assert db.make_reader(engine) is engine
    engine.dispose()


@pytest.fixture
def silent_server():
    """A port that takes TCP connections and never answers: a database server's host
    cut off after the SYN, as far as the client can tell."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield listener.getsockname()[1]
    listener.close()


def _connect_fails_within(url: str, seconds: float) -> None:
    engine = make_engine(url)
    ended = threading.Event()
    outcome: list[BaseException | None] = []

    def connect() -> None:
        try:
            with engine.connect():
                outcome.append(None)
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)
        ended.set()

    threading.Thread(target=connect, daemon=True).start()
    assert ended.wait(seconds), f"a connection to a silent server still waits after {seconds} s"
    assert isinstance(outcome[0], OperationalError), outcome
    engine.dispose()


@pytest.mark.parametrize("where", ["default", "url"])
def test_opening_a_connection_to_a_silent_server_gives_up(silent_server, monkeypatch, where):
    """psycopg alone waits 130 s; the engine's default (CONNECT_TIMEOUT_S) or the URL's own
    connect_timeout bounds it, and the caller's retries take over."""
    url = f"postgresql://nobody@127.0.0.1:{silent_server}/none"
    if where == "default":
        monkeypatch.setattr(db, "CONNECT_TIMEOUT_S", 1)
    else:
        monkeypatch.setattr(db, "CONNECT_TIMEOUT_S", 600)
        url += "?connect_timeout=1"
    _connect_fails_within(url, 15)
