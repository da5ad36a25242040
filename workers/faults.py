"""Test-only hooks a worker process reads from its environment; unset in production.

`STAPEL_TEST_CLOCK_SKEW_S=-120` runs this process's wall clock (`stapel.tables.utcnow`)
that many seconds off, as a host whose clock drifted would: nothing the watchdog compares
may depend on it (tests/faults/test_clock_skew.py).

`STAPEL_TEST_SLOW_LOAD_S=8` makes every model load of this process take that many seconds
longer, as a large model on a slow disk would (tests/faults/test_slow_model_load.py).

`STAPEL_TEST_SLOW_BATCH_S=0.05` makes every batch this process translates take that many
seconds longer, so a fast machine cannot finish a job before the test acts on it mid-run
(tests/faults/test_cancel_withdraws.py).

`STAPEL_TEST_FAULT` breaks a job's end on purpose, at the UPDATE that ends a job (after
its last chunk was marked succeeded, in the same transaction):
- `finish-error`: that statement raises OperationalError once per statement and
  parameters, as a lost connection would;
- `finish-kill`: the process SIGKILLs itself there (nothing of the transaction lands);
- `finish-commit-kill`: the process commits what the transaction did so far, then
  SIGKILLs itself: the chunk is succeeded and its job not ended, the state that two
  commits and a crash between them used to leave (the watchdog must end the job).
- `claim-kill`: the process SIGKILLs itself right after the statement that claims a
  group of two or more chunks, before the group's transaction commits
  (tests/faults/test_group_claim_kill.py).
- `take-kill`: the process SIGKILLs itself right after a task took two or more
  messages along (workers/takealong.py), before any of their chunks is claimed
  (tests/faults/test_take_along_kill.py).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from stapel import tables
from workers import batcher as batching
from workers import engine as translation
from workers import takealong as taking

log = logging.getLogger(__name__)

FAULTS = ("finish-error", "finish-kill", "finish-commit-kill")
GROUP_FAULTS = ("claim-kill",)
TAKE_FAULTS = ("take-kill",)


def _ends_a_job(statement: str) -> bool:
    text = statement.lstrip()
    return text.startswith("UPDATE jobs SET status=") and "finished_at" in text


def install(env: dict | None = None) -> None:
    """Apply the hooks the environment asks for (none when the variables are unset)."""
    env = dict(os.environ if env is None else env)
    skew = float(env.get("STAPEL_TEST_CLOCK_SKEW_S") or 0)
    if skew:
        tables.CLOCK_SKEW = timedelta(seconds=skew)
        log.warning("test hook: this process's clock runs %+g s off", skew)
    slow = float(env.get("STAPEL_TEST_SLOW_LOAD_S") or 0)
    if slow:
        slow_loads(slow)
        log.warning("test hook: every model load takes %g s longer", slow)
    per_batch = float(env.get("STAPEL_TEST_SLOW_BATCH_S") or 0)
    if per_batch:
        slow_batches(per_batch)
        log.warning("test hook: every batch takes %g s longer", per_batch)
    fault = env.get("STAPEL_TEST_FAULT", "")
    if fault in FAULTS:
        break_job_ends(fault)
        log.warning("test hook: fault %s at every job's end", fault)
    if fault in GROUP_FAULTS:
        kill_in_group_claim()
        log.warning("test hook: fault %s in a group's claim", fault)
    if fault in TAKE_FAULTS:
        kill_after_take()
        log.warning("test hook: fault %s after a take along", fault)


def kill_after_take() -> None:
    """SIGKILL this process once a task took two or more messages along."""
    take = taking.TakeAlong.take

    def _take(self, *args):
        taken = take(self, *args)
        if len(taken) >= 2:
            log.warning("test hook: take-kill after taking %d messages along", len(taken))
            os.kill(os.getpid(), signal.SIGKILL)
        return taken

    taking.TakeAlong.take = _take  # type: ignore[method-assign]


def slow_loads(seconds: float) -> None:
    """Make every model load of this process wait `seconds` first."""
    _slow_down(translation.Engine, "_load", seconds)


def slow_batches(seconds: float) -> None:
    """Make every batch this process translates wait `seconds` first."""
    _slow_down(batching.Batcher, "_translate", seconds)


def _slow_down(cls: type, name: str, seconds: float) -> None:
    """Replace the method with one that sleeps `seconds`, then calls it."""
    method = getattr(cls, name)

    def _slow(self, *args):
        time.sleep(seconds)
        return method(self, *args)

    setattr(cls, name, _slow)


def break_job_ends(fault: str) -> Callable[..., None]:
    """Install the fault on every engine of this process; return the listener (to remove)."""
    fired: set[str] = set()

    @event.listens_for(Engine, "before_cursor_execute")
    def _fault(conn, _cursor, statement, parameters, _context, _many) -> None:
        if not _ends_a_job(statement):
            return
        key = repr(parameters)
        if key in fired:
            return
        fired.add(key)
        log.warning("test hook: %s at a job's end", fault)
        if fault == "finish-error":
            raise OperationalError(statement, parameters, Exception("test hook: injected error"))
        if fault == "finish-commit-kill":
            conn.connection.dbapi_connection.commit()
        os.kill(os.getpid(), signal.SIGKILL)

    return _fault


def _claims_a_group(statement: str, parameters) -> bool:
    """Whether a statement is stapel.chunk_groups' claim of two chunks or more."""
    text = statement.lstrip()
    if not text.startswith("UPDATE chunks SET") or "claim_token=" not in text:
        return False
    if isinstance(parameters, dict):  # PostgreSQL: the ids are one array parameter
        return any(isinstance(v, list) and len(v) >= 2 for v in parameters.values())
    _, _, ids = text.partition("chunks.id IN (")  # SQLite: one placeholder per id
    return ids.split(")", 1)[0].count("?") >= 2


def kill_in_group_claim() -> Callable[..., None]:
    """SIGKILL this process once a group claim's UPDATE has run, before its commit."""

    @event.listens_for(Engine, "after_cursor_execute")
    def _fault(_conn, _cursor, statement, parameters, _context, _many) -> None:
        if _claims_a_group(statement, parameters):
            log.warning("test hook: claim-kill in a group's claim")
            os.kill(os.getpid(), signal.SIGKILL)

    return _fault
