"""Engine and session factory for the configured database (SQLite or PostgreSQL)."""

from __future__ import annotations

import fcntl
import logging
import os
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, TypeVar, cast

from sqlalchemy import (
    URL,
    ColumnElement,
    Connection,
    CursorResult,
    Engine,
    Executable,
    String,
    any_,
    bindparam,
    create_engine,
    event,
    func,
    tuple_,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger(__name__)

_WRITES = re.compile(r"\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)


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
            url,
            connect_args={"timeout": 30, "check_same_thread": False},
            pool_size=20,
            max_overflow=-1,
        )

        on_disk = "///" in url and path not in ("", ":memory:")
        turn = WriteTurn(FileTurn(f"{path}.write-turn") if on_disk else None)
        checkpointer = Checkpointer(path, turn) if on_disk else None
        _one_writer_at_a_time(engine, turn, checkpointer)

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            if checkpointer is not None:  # the Checkpointer's thread copies the WAL back
                cur.execute("PRAGMA wal_autocheckpoint=0")
            cur.close()

        return engine
    return _server_engine(url)


CONNECT_TIMEOUT_S = 10
"""How long opening a connection to a database server may take, unless the URL says
(`?connect_timeout=`). psycopg's own default is 130 s: a worker that began one during
a network cut held its task for two minutes after the network was back."""


def _server_engine(url: str | URL, **options) -> Engine:
    """Create an engine on a database server (PostgreSQL): its pool, pinged when idle."""
    url = make_url(url)
    connect_args = {} if "connect_timeout" in url.query else {"connect_timeout": CONNECT_TIMEOUT_S}
    engine = create_engine(url, pool_size=10, max_overflow=40, connect_args=connect_args, **options)
    _ping_when_idle(engine)
    return engine


def make_reader(engine: Engine) -> Engine:
    """Return the engine for one-statement reads: on a database server, its own pool of
    connections in autocommit.

    A read in autocommit sends no BEGIN before it and no ROLLBACK when its connection
    goes back to the pool: two of a PostgreSQL status read's three round trips. Its own
    pool, opened in autocommit, spares each read switching a connection of the
    transactional pool into autocommit and back (SQLAlchemy's per-connection isolation
    level: four of the driver's calls a read). SQLite begins no transaction for a SELECT
    anyway, and there putting a connection back out of autocommit runs a PRAGMA, so
    SQLite reads keep the engine as it is.
    """
    if engine.dialect.name == "sqlite":
        return engine
    # nothing to roll back in autocommit: no reset when a connection goes back
    return _server_engine(engine.url, isolation_level="AUTOCOMMIT", pool_reset_on_return=None)


PING_IDLE_S = 2.0
"""A database server's pooled connection is pinged when it is taken after lying idle this
long, not at every checkout (SQLAlchemy's pool_pre_ping): a ping is a round trip, a
fifth of a status read on PostgreSQL (docs/design/status-read.md). A connection
that breaks while in steady use fails its next statement instead, and that disconnect
error makes SQLAlchemy replace every connection of the pool opened before it at its next
checkout, so the error reaches the requests running at that moment, not later ones. (A
status read, stapel.one_row, runs again on another connection instead of failing.)"""


def _ping_when_idle(engine: Engine) -> None:
    """Ping a connection at checkout when it was checked in PING_IDLE_S ago or more."""

    @event.listens_for(engine, "checkin")
    def _idle_from(_dbapi_conn, record) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping(dbapi_conn, record, _proxy) -> None:
        since = record.info.get("idle_since")
        if since is None or time.monotonic() - since < PING_IDLE_S:
            return  # new, or in steady use
        try:
            engine.dialect.do_ping(dbapi_conn)
        except engine.dialect.loaded_dbapi.Error as exc:
            # the pool drops this connection and takes (or opens) another
            raise DisconnectionError(f"connection lost while idle: {exc}") from exc


WRITE_WAIT_S = 30
"""How long a thread waits for its SQLite write turn (as long as busy_timeout)."""
TURN_HELPER_IDLE_S = 60
"""How long a process's write-turn helper thread stays without a waiter before it ends."""


class FileTurn:
    """The write turn among processes: an exclusive flock on a file beside the database.

    SQLite's own wait for its write lock (the busy handler) sleeps in growing steps up
    to 100 ms, and the lock sits idle meanwhile. Here a waiter is woken as soon as the
    other process gives the turn back: a helper thread of the process blocks in flock for
    it (the kernel wakes it; a blocking flock has no timeout of its own), and the waiter
    waits for the helper until its deadline. A crashed holder's lock goes with its process.
    """

    _fd: int  # taken without waiting, by the writing thread
    _helper_fd: int  # taken by the helper, blocking (flock is per open file)
    _held: int  # the one of the two that holds the turn
    _cond: threading.Condition
    _asked: bool  # a thread of this process waits for the turn
    _granted: bool  # the helper took the turn for it
    _helping: bool  # the helper thread runs

    def __init__(self, path: str) -> None:
        self.path = path
        self._pid = 0  # the process the rest belongs to: set up at its first take

    def _set_up(self) -> None:
        """Open this process's files; no helper yet (a forked child has none)."""
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        self._helper_fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        self._held = -1
        self._pid, self._cond = os.getpid(), threading.Condition()
        self._asked = self._granted = self._helping = False

    def take(self, deadline: float) -> bool:
        """Take the turn; False when the deadline (time.monotonic) passes first."""
        if self._pid != os.getpid():
            self._set_up()
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._held = self._fd
            return True
        except BlockingIOError:
            pass
        with self._cond:
            self._asked = True
            if not self._helping:
                self._helping = True
                threading.Thread(target=self._help, name="sqlite-write-turn", daemon=True).start()
            self._cond.notify_all()
            if self._cond.wait_for(lambda: self._granted, deadline - time.monotonic()):
                self._granted = False
                self._held = self._helper_fd
                return True
            self._asked = False  # given up: the helper gives the turn back when it gets it
            return False

    def _help(self) -> None:
        """Take the turn, blocking, each time a thread of this process waits for it."""
        cond, fd = self._cond, self._helper_fd
        while True:
            with cond:
                if not cond.wait_for(lambda: self._asked, TURN_HELPER_IDLE_S):
                    self._helping = False
                    return
            fcntl.flock(fd, fcntl.LOCK_EX)
            with cond:
                if self._asked:
                    self._asked, self._granted = False, True
                    cond.notify_all()
                    continue
            fcntl.flock(fd, fcntl.LOCK_UN)

    def give_back(self) -> None:
        fcntl.flock(self._held, fcntl.LOCK_UN)


class WriteTurn:
    """A process's lock on SQLite writes, and the file turn among processes, taken together."""

    def __init__(self, file: FileTurn | None) -> None:
        self.lock = threading.Lock()
        self.file = file

    def take(self, deadline: float) -> bool:
        """Take both; False when the deadline (time.monotonic) passes first."""
        if not self.lock.acquire(timeout=max(deadline - time.monotonic(), 0)):
            return False
        if self.file is not None and not self.file.take(deadline):
            self.lock.release()
            return False
        return True

    def give_back(self) -> None:
        if self.file is not None:
            self.file.give_back()
        self.lock.release()


_TURN_TAKERS: weakref.WeakKeyDictionary[Engine, Callable[[Any, str], None]] = (
    weakref.WeakKeyDictionary()
)


def hold_write_turn(conn: Connection) -> None:
    """Take SQLite's write turn for the Connection's transaction, as its first write
    statement would (stapel.driver_sql writes past the Connection's events); nothing
    on another database. The transaction's commit or rollback gives it back."""
    take = _TURN_TAKERS.get(conn.engine)
    if take is not None:
        take(conn.connection.dbapi_connection, "a write")


def _one_writer_at_a_time(
    engine: Engine, turn: WriteTurn, checkpointer: Checkpointer | None
) -> None:
    """Let one thread at a time write to SQLite; the others queue here, not in SQLite.

    SQLite has one write lock per file. Threads that wait for it inside SQLite sleep in
    growing steps (1, 2, 5, ... 100 ms) and the lock sits idle between them: under many
    writers a commit of a fraction of a millisecond costs several. Queued on a Python
    lock instead, the next writer of the process starts as soon as the last one commits,
    and the process's writer takes the file turn among processes (FileTurn; none for an
    in-memory database). Both are taken at a transaction's first write statement (when
    SQLite takes its own) and given back once its COMMIT or ROLLBACK has run: the
    dialect's own do_commit/do_rollback are wrapped, since SQLAlchemy's commit and
    rollback events fire before them (a turn given back there sent the next writer into
    SQLite's busy handler while the commit still held SQLite's lock). A commit then
    calls for a checkpoint (Checkpointer), which takes the turn later on a thread of its own.
    """
    holder: list = [None]
    """The DBAPI connection whose transaction holds the turn (one per process at a time)."""

    def give_back(dbapi_conn, committed: bool = False) -> None:
        if dbapi_conn is None or holder[0] is not dbapi_conn:
            return
        holder[0] = None
        turn.give_back()
        if committed and checkpointer is not None:
            checkpointer.wrote()

    def take(dbapi_conn, statement: str) -> None:
        if holder[0] is dbapi_conn:
            return
        if not turn.take(time.monotonic() + WRITE_WAIT_S):
            raise _no_turn(statement)
        holder[0] = dbapi_conn

    @event.listens_for(engine, "before_cursor_execute")
    def _take(_conn, cursor, statement, _params, _context, _many) -> None:
        if _WRITES.match(statement):
            take(cursor.connection, statement)

    _TURN_TAKERS[engine] = take

    dialect = engine.dialect  # the pool's too: its reset-on-return rolls back through it
    for name, committed in (("do_commit", True), ("do_rollback", False)):
        setattr(dialect, name, _then_give_back(getattr(dialect, name), give_back, committed))

    # A connection invalidated or closed by the pool ends its transaction too.
    @event.listens_for(engine.pool, "invalidate")
    def _invalidate(dbapi_conn, _record, _exception) -> None:
        give_back(dbapi_conn)

    @event.listens_for(engine.pool, "close")
    def _close(dbapi_conn, _record) -> None:
        give_back(dbapi_conn)


CHECKPOINT_AFTER_S = 0.2
"""How long after a commit a process's Checkpointer copies the WAL back: the commits of
that time go back in one checkpoint."""
CHECKPOINTER_IDLE_S = 10
"""How long a process's checkpoint thread stays without a commit before it ends."""


class Checkpointer:
    """Copies SQLite's write-ahead log back into the database on a thread of the process,
    inside the write turn, once for the commits of CHECKPOINT_AFTER_S.

    The pooled connections have SQLite's own checkpoint off (it runs inside the COMMIT
    that takes the WAL past 1,000 pages, with that writer's caller waiting). The turn
    is held because a checkpoint beside a writer can corrupt the database in SQLite
    before 3.51.3 (the WAL-reset bug; docs/design/sqlite-write-turn.md). With no writer
    during it, a checkpoint copies every frame back unless a reader's snapshot still
    needs them, and the next writer starts the WAL over, so the WAL stays short.
    """

    def __init__(self, path: str, turn: WriteTurn) -> None:
        self.path, self.turn = path, turn
        self.uri = f"{Path(path).resolve().as_uri()}?mode=rw"  # never creates the file
        self._pid = 0  # the process the rest belongs to: set up at its first commit

    def _set_up(self) -> None:
        self._pid, self._cond = os.getpid(), threading.Condition()
        self._due = self._running = False

    def wrote(self) -> None:
        """Call for a checkpoint (a transaction has committed)."""
        if self._pid != os.getpid():
            self._set_up()
        if self._due:
            return  # one is called for already
        with self._cond:
            self._due = True
            if not self._running:
                self._running = True
                name = f"sqlite-checkpoint {self.path}"
                threading.Thread(target=self._run, name=name, daemon=True).start()
            self._cond.notify()

    def _run(self) -> None:
        conn = None
        try:
            conn = sqlite3.connect(self.uri, uri=True, isolation_level=None, timeout=30)
            while True:
                with self._cond:
                    if not self._cond.wait_for(lambda: self._due, CHECKPOINTER_IDLE_S):
                        self._running = False
                        return
                time.sleep(CHECKPOINT_AFTER_S)
                self._due = False  # a commit from now on calls for the next one
                self.checkpoint(conn)
        except sqlite3.Error as exc:  # the next commit starts a new thread
            log.warning("SQLite checkpoint failed path=%s error=%s", self.path, exc)
            with self._cond:
                self._due = self._running = False
        finally:
            if conn is not None:
                conn.close()

    def checkpoint(self, conn: sqlite3.Connection) -> bool:
        """One PASSIVE checkpoint inside the write turn; False when the turn did not come
        within WRITE_WAIT_S (the next commit calls for another).

        The log is synced to disk first, outside the turn: the checkpoint syncs it again
        inside (synchronous=NORMAL) and then finds only the frames written since, so the
        writers of every process wait for less of it.
        """
        self._sync_log()
        if not self.turn.take(time.monotonic() + WRITE_WAIT_S):
            return False
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        finally:
            self.turn.give_back()
        return True

    def _sync_log(self) -> None:
        """fsync the write-ahead log; none there, or an error, leaves the sync to the
        checkpoint itself (an error is logged)."""
        try:
            fd = os.open(f"{self.path}-wal", os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning("SQLite log sync failed path=%s error=%s", self.path, exc)


def _then_give_back(end: Callable, give_back: Callable, committed: bool) -> Callable:
    """Wrap a dialect's do_commit or do_rollback: end the transaction, then the turn."""

    def ended(connection) -> None:
        try:
            end(connection)
        finally:
            give_back(getattr(connection, "dbapi_connection", connection), committed)

    return ended


def _no_turn(statement: str) -> OperationalError:
    return OperationalError(
        statement,
        None,
        Exception(f"database is locked: no write turn within {WRITE_WAIT_S} s"),
    )


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Return a session factory whose objects stay readable after commit."""
    return sessionmaker(bind=engine, expire_on_commit=False)


T = TypeVar("T")

DB_RETRY_DELAYS = (0.5, 1, 2, 4, 8)
"""Backoff between tries of a DB call that failed on a lost connection."""


def with_retry(session: Session, call: Callable[[], T]) -> T:
    """Run a DB call, retrying with backoff while the database is unreachable."""
    for delay in DB_RETRY_DELAYS:
        try:
            return call()
        except (OperationalError, PoolTimeout) as exc:
            session.rollback()
            log.warning(
                "database unavailable, retrying in %ss error=%s", delay, getattr(exc, "orig", exc)
            )
            time.sleep(delay)
    return call()


def read_retried(session: Session, call: Callable[[], T]) -> T:
    """Run a read and end its transaction, both retried while the database is unreachable.

    The commit is inside the retry: one that fails outside it leaves the session
    unusable (its transaction half-ended) for every later step that shares it.
    """

    def read() -> T:
        value = call()
        session.commit()
        return value

    return with_retry(session, read)


def affected(session: Session, statement: Executable, params: dict | None = None) -> int:
    """Run an UPDATE or DELETE and return how many rows it changed (a compare-and-set)."""
    result = session.execute(statement, params)
    return cast(CursorResult, result).rowcount


def ids_in(dialect: str, column: ColumnElement, name: str) -> ColumnElement:
    """`column IN :name`, the list of strings given at execution as parameter `name`.

    On PostgreSQL it is `column = ANY(:name)`, one array parameter: the statement's text
    is the same for any number of values, so SQLAlchemy compiles it once and psycopg
    parses it once (an IN list of 100 values was a new statement every time, a fifth of
    a worker's group claim in its profile). SQLite expands the list.
    """
    if dialect == "postgresql":
        return column == any_(bindparam(name, type_=ARRAY(String)))
    return column.in_(bindparam(name, expanding=True))


PAIR_SEP = "\x1f"
"""Joins a pair's two strings into the one PostgreSQL compares (ids never hold it)."""


def pairs_in(dialect: str, first: ColumnElement, second: ColumnElement, name: str) -> ColumnElement:
    """`(first, second) IN :name`, pairs of strings given at execution (`pairs_param`)."""
    if dialect != "postgresql":
        return tuple_(first, second).in_(bindparam(name, expanding=True))
    return ids_in(dialect, first, f"{name}_first") & (
        func.concat(first, PAIR_SEP, second) == any_(bindparam(name, type_=ARRAY(String)))
    )


def pairs_param(dialect: str, name: str, pairs: Collection[tuple[str, str]]) -> dict:
    """The parameters of `pairs_in(dialect, ..., name)` for these pairs."""
    if dialect != "postgresql":
        return {name: list(pairs)}
    return {
        f"{name}_first": sorted({a for a, _ in pairs}),
        name: [f"{a}{PAIR_SEP}{b}" for a, b in pairs],
    }
