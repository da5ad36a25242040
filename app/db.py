"""Engine and session factory for the configured database (SQLite or PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker


def make_engine(url: str) -> Engine:
    """Create an engine; SQLite gets WAL, a busy timeout and enforced foreign keys."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        # No pool limit: a worker runs many tasks at once, SQLite connections are cheap,
        # and writers queue on the file lock (busy timeout), not on a pool. Twenty are
        # kept open for reuse (opening one costs a connect and four pragmas).
        engine = create_engine(
            url, connect_args={"timeout": 30, "check_same_thread": False},
            pool_size=20, max_overflow=-1,
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=40)


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Return a session factory whose objects stay readable after commit."""
    return sessionmaker(bind=engine, expire_on_commit=False)
