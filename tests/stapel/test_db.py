"""SQLite writers queue on a Python lock in a process and on a file lock among processes,
taken and given back with the transaction, so a writer starts as soon as the last one
commits."""

from __future__ import annotations

import contextlib
import fcntl
import multiprocessing
import os
import sqlite3
import struct
import threading
import time

import pytest
from sqlalchemy import event, func, insert, select, text, update
from sqlalchemy.exc import OperationalError

from stapel import db
from stapel.db import make_engine, make_session_factory
from stapel.tables import Tenant
from tests.conftest import migrate
from tests.factories import wait_for


@pytest.fixture
def sqlite_sessions(tmp_path, monkeypatch):
    monkeypatch.setattr(db, "WRITE_WAIT_S", 0.3)
    url = f"sqlite:///{tmp_path / 'writers.db'}"
    migrate(url)
    engine = make_engine(url)
    yield make_session_factory(engine)
    engine.dispose()


def add_tenant(session, name: str) -> None:
    session.execute(insert(Tenant).values(id=name, name=name, callback_secret="s"))


def test_a_second_writer_waits_for_the_first_to_end_its_transaction(sqlite_sessions):
    with sqlite_sessions() as first, sqlite_sessions() as second:
        add_tenant(first, "a")
        with pytest.raises(OperationalError, match="no write turn within"):
            add_tenant(second, "b")  # queued behind `first`, gave up after WRITE_WAIT_S
        second.rollback()
        first.commit()
        add_tenant(second, "b")
        second.commit()
        assert sorted(second.scalars(select(Tenant.name))) == ["a", "b"]


@pytest.mark.parametrize("end", ["rollback", "close"])
def test_a_transaction_ended_without_commit_gives_the_turn_back(sqlite_sessions, end):
    first = sqlite_sessions()
    add_tenant(first, "a")
    getattr(first, end)()
    with sqlite_sessions() as second:
        add_tenant(second, "b")
        second.commit()


def test_reads_do_not_wait_for_a_writer(sqlite_sessions):
    with sqlite_sessions() as writer, sqlite_sessions() as reader:
        add_tenant(writer, "a")
        assert list(reader.scalars(select(Tenant.name))) == []
        writer.commit()


def test_many_threads_write_at_once_and_none_is_lost(sqlite_sessions, monkeypatch):
    # Sixteen writers queue for one turn: the last may wait behind all the others' commits,
    # longer than the fixture's short wait on a loaded machine (CI failed so at 0.3 s).
    monkeypatch.setattr(db, "WRITE_WAIT_S", 30)
    with sqlite_sessions() as session:
        add_tenant(session, "counter")
        session.commit()
    errors: list[Exception] = []

    def bump(n: int) -> None:
        try:
            with sqlite_sessions() as s:
                for _ in range(5):
                    s.execute(
                        update(Tenant).where(Tenant.id == "counter").values(name=Tenant.name + ".")
                    )
                    s.commit()
        except Exception as exc:  # collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=bump, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with sqlite_sessions() as s:
        assert s.scalar(select(Tenant.name).where(Tenant.id == "counter")) == "counter" + "." * 80


def _hold_a_write(url: str, holding, release) -> None:
    """In another process: open a write transaction, say so, and keep it until told."""
    with make_session_factory(make_engine(url))() as session:
        add_tenant(session, "other")
        holding.set()
        release.wait(30)
        session.commit()


@contextlib.contextmanager
def another_process_writing(tmp_path):
    """A migrated database, a process holding a write transaction on it, and the event
    that lets that process commit; yields (url, release, the process)."""
    url = f"sqlite:///{tmp_path / 'writers.db'}"
    migrate(url)
    spawn = multiprocessing.get_context("spawn")
    holding, release = spawn.Event(), spawn.Event()
    other = spawn.Process(target=_hold_a_write, args=(url, holding, release))
    other.start()
    try:
        assert holding.wait(60), "the other process never wrote"
        yield url, release, other
    finally:
        release.set()
        other.join(30)


@pytest.mark.process
def test_a_writer_in_another_process_holds_the_turn_until_it_commits(tmp_path, monkeypatch):
    monkeypatch.setattr(db, "WRITE_WAIT_S", 0.3)
    with another_process_writing(tmp_path) as (url, release, other):
        engine = make_engine(url)
        with make_session_factory(engine)() as session:
            # waits on the file turn (not 30 s in SQLite's busy handler), then gives up
            with pytest.raises(OperationalError, match="no write turn within"):
                add_tenant(session, "mine")
            session.rollback()
            release.set()
            other.join(30)
            add_tenant(session, "mine")  # the turn is free again once the other commits
            session.commit()
            assert sorted(session.scalars(select(Tenant.name))) == ["mine", "other"]
        engine.dispose()


@pytest.mark.process
def test_a_writer_waiting_for_another_process_is_woken_by_its_commit_not_by_polling(
    tmp_path, monkeypatch
):
    """The waiter looks once; the process's helper blocks in flock until the other
    process gives the turn back (a poll every few ms left the turn idle between looks)."""
    calls: list[int] = []
    flock = fcntl.flock

    def counted(fd, operation) -> None:
        if not threading.current_thread().name.startswith("sqlite-checkpoint"):
            calls.append(operation)  # the writer's and its helper's, not the checkpoint's
        flock(fd, operation)

    written = threading.Event()
    with another_process_writing(tmp_path) as (url, release, _other):
        monkeypatch.setattr(fcntl, "flock", counted)
        engine = make_engine(url)

        def write() -> None:
            with make_session_factory(engine)() as session:
                add_tenant(session, "mine")
                session.commit()
            written.set()

        writer = threading.Thread(target=write)
        writer.start()
        # the helper blocking (or, with a poll, many looks)
        wait_for(lambda: fcntl.LOCK_EX in calls or len(calls) >= 50, interval=0.005)
        time.sleep(0.2)  # the other process holds on: a poller would look again meanwhile
        release.set()
        assert written.wait(30), "the writer never got the turn"
        writer.join(30)
        engine.dispose()
    takes = [op for op in calls if op & fcntl.LOCK_EX]
    assert takes == [fcntl.LOCK_EX | fcntl.LOCK_NB, fcntl.LOCK_EX]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_the_migrations_build_the_tables_the_code_declares(kind, tmp_path, request):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from stapel.tables import Base

    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'schema.db'}"
        migrate(url)
    else:
        url = request.getfixturevalue("postgres_url")
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_the_next_writer_starts_after_the_last_commit_has_run(sqlite_sessions, monkeypatch):
    """SQLAlchemy's commit event fires before the COMMIT: a turn given back there let the
    next writer meet SQLite's lock, still held, and sleep in SQLite's busy handler."""
    monkeypatch.setattr(db, "WRITE_WAIT_S", 30)
    engine = sqlite_sessions.kw["bind"]
    path = engine.url.database
    commit = engine.dialect.do_commit
    committing = threading.Event()

    def slow_commit(connection) -> None:  # widens the window between the event and COMMIT
        committing.set()
        time.sleep(0.2)
        commit(connection)

    monkeypatch.setattr(engine.dialect, "do_commit", slow_commit)
    seen: list[int] = []

    @event.listens_for(engine, "before_cursor_execute")
    def _look(_conn, _cursor, statement, *_args) -> None:  # runs once the turn is taken
        if threading.current_thread().name == "second" and statement.startswith("INSERT"):
            with sqlite3.connect(path) as other:
                seen.append(other.execute("SELECT count(*) FROM tenants").fetchone()[0])

    def second() -> None:
        committing.wait(10)
        with sqlite_sessions() as s:
            add_tenant(s, "b")
            s.commit()

    thread = threading.Thread(target=second, name="second")
    thread.start()
    with sqlite_sessions() as first:
        add_tenant(first, "a")
        first.commit()
    thread.join()
    assert seen == [1], "the second writer began before the first one's COMMIT had run"


class WalIndex:
    """Reads the WAL index's header (SQLite's file format: mxFrame at byte 16 of the -shm
    file, nBackfill at byte 96) through one descriptor kept open until close(): closing
    any descriptor of that file would drop this process's POSIX locks on it, SQLite's
    included."""

    def __init__(self, path: str) -> None:
        self.path, self.fd = f"{path}-shm", -1

    def frames(self) -> tuple[int, int]:
        """(frames in the WAL, frames of them copied back)."""
        if self.fd < 0:
            self.fd = os.open(self.path, os.O_RDONLY)
        header = os.pread(self.fd, 100, 0)
        return struct.unpack_from("=I", header, 16)[0], struct.unpack_from("=I", header, 96)[0]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)


@pytest.fixture
def wal_index():
    """A WalIndex factory; each index is closed after the test's engines are disposed."""
    made: list[WalIndex] = []
    yield lambda path: made.append(WalIndex(path)) or made[-1]
    for index in made:
        index.close()


def test_a_commit_leaves_the_checkpoint_to_the_process_checkpointer(sqlite_sessions, wal_index):
    """No writer copies the WAL back inside its COMMIT (and the write turn): the pooled
    connections have SQLite's automatic checkpoint off, and the process's checkpoint
    thread copies what they wrote soon after."""
    wal = wal_index(sqlite_sessions.kw["bind"].url.database)
    with sqlite_sessions() as session:
        assert session.execute(text("PRAGMA wal_autocheckpoint")).scalar() == 0
        for n in range(50):
            add_tenant(session, f"t{n}")
            session.commit()
    assert wal.frames()[0] > 0
    wait_for(lambda: (w := wal.frames())[0] == w[1] > 0, timeout=10)


def test_the_checkpoint_thread_ends_when_idle_and_the_next_commit_starts_another(
    sqlite_sessions, monkeypatch, wal_index
):
    monkeypatch.setattr(db, "CHECKPOINTER_IDLE_S", 0.2)
    path = sqlite_sessions.kw["bind"].url.database
    wal = wal_index(path)

    def checkpointing() -> bool:  # this engine's thread (another test's may still idle)
        return any(t.name == f"sqlite-checkpoint {path}" for t in threading.enumerate())

    with sqlite_sessions() as session:
        add_tenant(session, "a")
        session.commit()
        assert checkpointing()  # started by the commit; it sleeps CHECKPOINT_AFTER_S first
        wait_for(lambda: not checkpointing(), timeout=10, interval=0.02)
        add_tenant(session, "b")
        session.commit()
    wait_for(lambda: (w := wal.frames())[0] == w[1] and w[0] > 0, timeout=10)


def test_a_checkpoint_waits_for_the_write_turn(tmp_path, monkeypatch, wal_index):
    """A checkpoint never runs beside a writer: before SQLite 3.51.3 one that misses a
    commit starting the WAL over during it can corrupt the database (the WAL-reset bug).
    While another connection's transaction holds the turn, a checkpoint gives up at its
    deadline without copying a frame; after the commit it copies them all back, and the
    next writer starts the WAL over."""
    monkeypatch.setattr(db, "WRITE_WAIT_S", 0.2)
    monkeypatch.setattr(db.Checkpointer, "wrote", lambda self: None)  # the engine's own: off
    url = f"sqlite:///{tmp_path / 'turn.db'}"
    migrate(url)
    engine = make_engine(url)
    path = engine.url.database
    wal = wal_index(path)
    sessions = make_session_factory(engine)
    # another process's: the same file turn, its own lock
    checkpointer = db.Checkpointer(path, db.WriteTurn(db.FileTurn(f"{path}.write-turn")))
    conn = sqlite3.connect(path, isolation_level=None)
    with sessions() as session:
        for n in range(5):
            add_tenant(session, f"t{n}")
            session.commit()
        add_tenant(session, "open")  # a writer in its transaction holds the turn
        frames, copied = wal.frames()
        assert frames > 0 and copied == 0
        ran = checkpointer.checkpoint(conn)
        assert wal.frames() == (frames, 0), "a checkpoint ran beside a writer"
        assert ran is False
        session.commit()
        assert checkpointer.checkpoint(conn) is True
        done, copied = wal.frames()
        assert done == copied > frames
        add_tenant(session, "after")
        session.commit()  # the WAL is all copied back: this writer starts it over
        assert wal.frames()[0] < done
        assert session.scalar(select(func.count()).select_from(Tenant)) == 7
    conn.close()
    engine.dispose()


def test_a_checkpoint_syncs_the_log_before_it_takes_the_turn(tmp_path, monkeypatch):
    """The log's sync, a checkpoint's slow part on a disk, comes before the write turn is
    taken: inside it the checkpoint's own sync finds only what was written since."""
    monkeypatch.setattr(db.Checkpointer, "wrote", lambda self: None)  # the engine's own: off
    url = f"sqlite:///{tmp_path / 'sync.db'}"
    migrate(url)
    engine = make_engine(url)
    path = engine.url.database
    turn = db.WriteTurn(db.FileTurn(f"{path}.write-turn"))
    checkpointer = db.Checkpointer(path, turn)
    steps: list[str] = []
    fsync, take = os.fsync, turn.take

    def recorded_fsync(fd: int) -> None:
        steps.append(os.path.realpath(os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def recorded_take(deadline: float) -> bool:
        steps.append("turn")
        return take(deadline)

    with make_session_factory(engine)() as session:
        add_tenant(session, "a")
        session.commit()
    monkeypatch.setattr(os, "fsync", recorded_fsync)
    monkeypatch.setattr(turn, "take", recorded_take)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert checkpointer.checkpoint(conn) is True
    finally:
        conn.close()
        engine.dispose()
    assert steps == [os.path.realpath(f"{path}-wal"), "turn"]


def test_the_wal_of_writes_without_a_pause_is_started_over(sqlite_sessions, monkeypatch, wal_index):
    """Under commits one after another the checkpoints, taking the turn between two of
    them, copy every frame back, and a later writer starts the WAL over (beside the
    writers a checkpoint was short of the last frames each time, and the WAL grew to
    24,000 frames after 6,000 commits)."""
    monkeypatch.setattr(db, "CHECKPOINT_AFTER_S", 0.01)
    wal = wal_index(sqlite_sessions.kw["bind"].url.database)
    starts, last, most = 0, 0, 0
    with sqlite_sessions() as session:
        for n in range(3000):
            add_tenant(session, f"t{n}")
            session.commit()
            frames = wal.frames()[0]
            starts += frames < last
            last, most = frames, max(most, frames)
    assert starts >= 2, f"the WAL was never started over ({most} frames at most)"
