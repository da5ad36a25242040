"""A read ends its transaction inside its retry (stapel.db.read_retried): a commit that
fails on a lost connection is retried with the read, and the session stays usable for
the steps that share it (a worker's unit of chunks runs on one session)."""

from __future__ import annotations

import pytest
from sqlalchemy import event, text

from stapel.db import make_engine, make_session_factory, read_retried


@pytest.fixture
def pg(postgres_url):
    engine = make_engine(postgres_url)
    with make_session_factory(engine)() as session:
        yield engine, session
    engine.dispose()


def _lose_connection_at_commit(engine, session, times: int) -> list[int]:
    """Terminate the session's backend just before each of its next `times` commits (a
    failover between a read and its commit); returns the terminated backends."""
    cut: list[int] = []

    @event.listens_for(session, "before_commit")
    def terminate(s) -> None:
        if len(cut) >= times:
            return
        pid = s.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with engine.connect() as other:
            assert other.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar()
        cut.append(pid)

    return cut


def test_a_read_whose_commit_fails_is_read_again_and_the_session_goes_on(pg):
    engine, session = pg
    cut = _lose_connection_at_commit(engine, session, times=1)
    reads: list[int] = []

    def read() -> int:
        reads.append(1)
        return session.execute(text("SELECT 41 + 1")).scalar_one()

    assert read_retried(session, read) == 42
    assert (len(cut), len(reads)) == (1, 2)  # the commit failed once: read again
    backend = session.execute(text("SELECT pg_backend_pid()")).scalar_one()
    assert backend not in cut  # the session goes on, on a new connection
