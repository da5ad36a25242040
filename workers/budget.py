"""A worker's segment budget, handed out in order: priority first, then arrival.

Celery reserves up to `-c` messages per worker, so with 128 task threads most tasks of
a busy worker wait here for room. They wait in a line rather than racing for it (a
`notify_all` race would let a chunk that arrived later start first), and the line's
waiting segments and task ids go into the presence record: the web routes no more to
a worker whose line is long, and the watchdog counts a waiting task as alive.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field


@dataclass(order=True)
class Ticket:
    """One task's place in the line for room."""

    priority: int
    """The broker's priority (0 served first)."""
    seq: int
    segments: int = field(compare=False)
    task_id: str = field(compare=False, default="")
    look_at: float = field(compare=False, default=0.0)
    """When this ticket, at the head of the line, next looks for room elsewhere."""


class Budget:
    """At most `limit` segments translating at once; the first chunk always fits."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._line: list[Ticket] = []
        self._seq = itertools.count()
        self.closed = False
        self._room = threading.Condition()

    def enter(self, segments: int, priority: int = 0, task_id: str = "") -> Ticket:
        """Join the line for room; wait with `wait`, give up with `leave`."""
        with self._room:
            ticket = Ticket(priority, next(self._seq), segments, task_id)
            self._line.append(ticket)
            self._line.sort()
            return ticket

    def take_up_to(self, segments: int, more: int) -> int:
        """Take room for a chunk of `segments` and up to `more` beside it, when no task
        waits in line: the chunk's as `wait` would give it (it fits when nothing is
        held), the rest only within the limit; 0 when the chunk does not fit now."""
        with self._room:
            if self.closed or self._line or (self.held and self.held + segments > self.limit):
                return 0
            taken = segments + max(0, min(more, self.limit - self.held - segments))
            self.held += taken
            return taken

    def wait(self, ticket: Ticket, look_s: float) -> bool:
        """Wait for room; True once taken, False when the ticket should look elsewhere.

        Only the head of the line looks (at most every look_s), so chunks leave this
        worker in the order they would have started here; a new head that has waited
        look_s already looks at once. All look when the budget is closed.
        """
        with self._room:
            if not ticket.look_at:
                ticket.look_at = time.monotonic() + look_s
            while not self._fits(ticket):
                now, head = time.monotonic(), self._line[0] is ticket
                if self.closed or (head and now >= ticket.look_at):
                    ticket.look_at = now + look_s
                    return False
                # Behind the head it waits for a change (every one notifies), not a clock.
                self._room.wait(timeout=ticket.look_at - now if head else None)
            self._line.remove(ticket)
            self.held += ticket.segments
            self._room.notify_all()  # the next in line may fit too
            return True

    def close(self) -> None:
        """Stop waiting: every ticket in line looks elsewhere now (the worker is stopping)."""
        with self._room:
            self.closed = True
            self._room.notify_all()

    def leave(self, ticket: Ticket) -> None:
        """Leave the line without room (the chunk is handed back)."""
        with self._room:
            if ticket in self._line:
                self._line.remove(ticket)
            self._room.notify_all()

    def release(self, segments: int) -> None:
        """Give segments back and wake the line."""
        with self._room:
            self.held -= segments
            self._room.notify_all()

    def waiting(self) -> tuple[int, list[str]]:
        """Return the segments and task ids waiting in the line."""
        with self._room:
            return sum(t.segments for t in self._line), [t.task_id for t in self._line if t.task_id]

    def _fits(self, ticket: Ticket) -> bool:
        head = self._line[0] is ticket
        return head and (not self.held or self.held + ticket.segments <= self.limit)


class Held:
    """Room taken in a budget (`take_up_to`): part of it given back as soon as it is
    known to be spare (`keep`), the rest once the work ends (`release`, once)."""

    def __init__(self, budget: Budget, segments: int) -> None:
        self.budget, self.segments = budget, segments

    def keep(self, segments: int) -> None:
        """Give back all but `segments` of the room held."""
        spare, self.segments = self.segments - segments, segments
        self.budget.release(spare)

    def release(self) -> None:
        """Give back what is still held."""
        held, self.segments = self.segments, 0
        self.budget.release(held)
