"""A worker's group committer: the claims and finishes of its tasks, a group at a time.

Task threads hand their chunk's claim or finish to a Group and wait on a Future; the
group's one thread takes everything of its kind waiting (up to MAX_GROUP) and runs it
as one transaction (stapel.chunk_groups), then resolves each task's future with its own
row's result. An idle committer runs a lone request at once; under load the requests
that arrive while one group runs, or within LINGER_S after, make the next group, as a
database's group commit does (docs/design/worker-cost.md has the measurements).

A group that raises is run again one request at a time, so a request that fails alone
fails alone: a group never fails together. A database that stays unreachable (with_retry
gives up) fails the requests of the group, as it would have failed each task's own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

import redis
from sqlalchemy.orm import Session, sessionmaker

from stapel import chunk_groups
from stapel.broker import fast_lane
from stapel.chunk_groups import Finish, Pending
from stapel.chunks import Claim
from stapel.db import with_retry
from stapel.interactive import announce_ends, waited_on
from stapel.states import ChunkOutcome

log = logging.getLogger(__name__)

MAX_GROUP = 100
"""At most this many requests in one transaction (River's batch completer's figure)."""
LINGER_S = 0.01
"""Under load (a group ended within BUSY_S), a group waits this long for more requests
(or for MAX_GROUP) before it runs, so its cost is shared by more chunks. A request on an
idle worker runs at once, and so does one of the interactive lane or a small urgent job
(stapel.broker.fast_lane): a caller waits on it."""
BUSY_S = 0.05
"""A group ended within this long before a request arrives: the committer is under load."""

R = TypeVar("R")
Q = TypeVar("Q")


class Group(Generic[Q, R]):
    """One thread running `run(session, requests)` for every group of waiting requests."""

    def __init__(
        self,
        name: str,
        sessions: sessionmaker[Session],
        run: Callable[[Session, list[Q]], list[R]],
    ) -> None:
        self.name, self.sessions, self.run = name, sessions, run
        self._waiting: list[tuple[Q, Future[R]]] = []
        self._urgent = False
        """A request waiting now must not linger (stapel.broker.fast_lane)."""
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.groups = 0
        self.requests = 0
        self._ended = 0.0
        """When the last group ended: a request soon after lingers for company."""

    def submit(self, request: Q, urgent: bool = False) -> R:
        """Queue request for the next group and wait for its own result (or exception);
        an urgent one ends the group's linger."""
        (result,) = self.submit_many([request], urgent)
        if isinstance(result, BaseException):
            raise result
        return result

    def submit_many(self, requests: Sequence[Q], urgent: bool = False) -> list[R | BaseException]:
        """Queue requests together and wait for each one's own result (or exception)."""
        futures: list[Future[R]] = [Future() for _ in requests]
        with self._cond:
            self._waiting.extend(zip(requests, futures, strict=True))
            self._urgent = self._urgent or urgent
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name=f"committer-{self.name}", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return [future.exception() or future.result() for future in futures]

    def _take(self) -> list[tuple[Q, Future[R]]]:
        with self._cond:
            while not self._waiting:
                self._cond.wait()
            if time.monotonic() - self._ended < BUSY_S:  # under load: let the group fill
                deadline = time.monotonic() + LINGER_S
                while (
                    not self._urgent
                    and len(self._waiting) < MAX_GROUP
                    and (left := deadline - time.monotonic()) > 0
                ):
                    self._cond.wait(left)
            taken, self._waiting = self._waiting[:MAX_GROUP], self._waiting[MAX_GROUP:]
            self._urgent = False
            return taken

    def _loop(self) -> None:
        with self.sessions() as session:
            while True:
                self._serve(session, self._take())

    def _serve(self, session: Session, taken: list[tuple[Q, Future[R]]]) -> None:
        requests = [request for request, _ in taken]
        self.groups += 1
        self.requests += len(requests)
        try:
            results = with_retry(session, lambda: self.run(session, requests))
        except Exception as exc:  # each request is tried alone below
            session.rollback()
            if len(taken) == 1:
                taken[0][1].set_exception(exc)
                return
            log.warning(
                "group failed, running its requests one by one group=%s size=%d error=%s",
                self.name,
                len(taken),
                f"{type(exc).__name__}: {exc}"[:300],
            )
            for one in taken:
                self._serve(session, [one])
            return
        self._ended = time.monotonic()
        for (_, future), result in zip(taken, results, strict=True):
            future.set_result(result)


def _claims(worker: str) -> Callable[[Session, list[str]], list[tuple[Claim, Pending] | None]]:
    def run(session: Session, chunk_ids: list[str]) -> list[tuple[Claim, Pending] | None]:
        won = chunk_groups.claim_chunks(session, chunk_ids, worker)
        # a chunk delivered twice into one group: its first request has the claim
        return [won.pop(chunk_id, None) for chunk_id in chunk_ids]

    return run


def _finishes(client: redis.Redis) -> Callable[[Session, list[Finish]], list[ChunkOutcome]]:
    def run(session: Session, finishes: list[Finish]) -> list[ChunkOutcome]:
        outcomes = chunk_groups.finish_chunks(session, finishes)
        # committed: a caller waiting on one of these jobs hears of its end (one round trip)
        ends = zip(finishes, outcomes, strict=True)
        announce_ends(client, [(f.claim.job_id, o) for f, o in ends if waited_on(f.claim.priority)])
        return outcomes

    return run


class Committer:
    """A worker's claim group and finish group, each its own thread and connection."""

    def __init__(self, sessions: sessionmaker[Session], client: redis.Redis) -> None:
        self.sessions = sessions
        self._claims: dict[str, Group[str, tuple[Claim, Pending] | None]] = {}
        self._lock = threading.Lock()
        self.finishes: Group[Finish, ChunkOutcome] = Group("finish", sessions, _finishes(client))

    def claim(
        self, chunk_id: str, worker: str, urgent: bool = False
    ) -> tuple[Claim, Pending] | None:
        """Claim a queued chunk with the others waiting; None: not claimable."""
        return self._claim_group(worker).submit(chunk_id, urgent)

    def claim_many(
        self, chunk_ids: Sequence[str], worker: str, urgent: bool = False
    ) -> list[tuple[Claim, Pending] | BaseException | None]:
        """Claim queued chunks together: each one's claim, None, or what it raised."""
        return self._claim_group(worker).submit_many(chunk_ids, urgent)

    def _claim_group(self, worker: str) -> Group[str, tuple[Claim, Pending] | None]:
        with self._lock:
            group = self._claims.get(worker)
            if group is None:
                group = self._claims[worker] = Group("claim", self.sessions, _claims(worker))
        return group

    def finish_many(self, finishes: Sequence[Finish]) -> list[ChunkOutcome | BaseException]:
        """Finish chunks together: each one's outcome, or what it raised."""
        urgent = any(fast_lane(f.claim.priority, f.claim.end - f.claim.first) for f in finishes)
        return self.finishes.submit_many(finishes, urgent)
