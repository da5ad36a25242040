"""Parse slots: how many documents one web process reads at once, and how many of one tenant.

Reading a document holds a web thread for as long as it takes (linear in its size, but a
large upload is seconds of CPU). Unbounded, one tenant's uploads took every thread and
other tenants' status reads timed out. A request that finds no free slot is answered
at once, never queued: 429 when its tenant holds its share, 503 when the process has
none free, both with Retry-After.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from flask import current_app, g

from stapel.exceptions import TooManyParses, Unavailable

RETRY_AFTER_S = 2
FREE_BELOW_BYTES = 64 * 1024
"""Input this small is read without a slot: linear reading makes it milliseconds, and a
429 on a small request would make Weblate disable the engine for 30 minutes."""


class ParseSlots:
    """At most `total` documents read at once in this process, `per_tenant` of one tenant."""

    def __init__(self, total: int, per_tenant: int) -> None:
        self.total, self.per_tenant = total, per_tenant
        self.lock = threading.Lock()
        self.held: Counter[str] = Counter()

    @contextmanager
    def hold(self, tenant: str) -> Iterator[None]:
        """Hold a slot for tenant while the block runs; raise when none is free."""
        with self.lock:
            if self.held[tenant] >= self.per_tenant:
                raise TooManyParses(
                    f"this tenant already has {self.per_tenant} documents being read here; "
                    f"retry in {RETRY_AFTER_S} s",
                    retry_after_s=RETRY_AFTER_S,
                )
            if self.held.total() >= self.total:
                raise Unavailable(
                    "every document reader of this server is busy; retry shortly",
                    code="parsers_busy",
                    retry_after_s=RETRY_AFTER_S,
                )
            self.held[tenant] += 1
        try:
            yield
        finally:
            with self.lock:
                self.held[tenant] -= 1
                if not self.held[tenant]:
                    del self.held[tenant]


@contextmanager
def parse_slot(size: int) -> Iterator[None]:
    """Hold one of this process's parse slots for the request's tenant to read `size`
    bytes or characters (none below FREE_BELOW_BYTES)."""
    if size < FREE_BELOW_BYTES:
        yield
        return
    with current_app.extensions["stapel"].parse_slots.hold(g.get("tenant_id") or ""):
        yield
