"""300 jobs point their callback at a receiver that drips one byte a second.

The receiver (on loopback, allowed by the operator) takes each POST and answers one
byte a second, never finishing its status line. Deliveries run on their own queue and
worker process (`callbacks`), each exchange ends at `STAPEL_CALLBACK_TIMEOUT_S`, and
the tenant has at most `STAPEL_CALLBACK_TENANT_IN_FLIGHT` deliveries in flight. What
must hold: every delivery ends at the deadline, the attempt was counted before each
POST, no transaction stays open meanwhile (PostgreSQL), the watchdog keeps its period,
and translation goes on: no translating worker ever runs a delivery, and a job of
another tenant submitted during the flood is translated.
"""

from __future__ import annotations

import itertools
import re
import select as selectors
import socket
import statistics
import threading
import time
from datetime import datetime

import pytest
from sqlalchemy import func, select, text

from stapel.keys import create_key
from stapel.tables import Job, db_now
from tests.factories import sentences, wait_for
from tests.faults.harness import DEADLINE_S, SHORT_ENV

pytestmark = [pytest.mark.fault, pytest.mark.slow]

JOBS = 300
CALLBACK_DEADLINE_S = 2.0
TENANT_CAP = 4
WATCHDOG_S = float(SHORT_ENV["STAPEL_WATCHDOG_S"])
ENV = {
    "STAPEL_CALLBACK_ALLOW_HOSTS": "127.0.0.1",
    "STAPEL_CALLBACK_TIMEOUT_S": str(CALLBACK_DEADLINE_S),
    "STAPEL_CALLBACK_TENANT_IN_FLIGHT": str(TENANT_CAP),
}
PASS_LINE = re.compile(r"^(\S+ \S+) INFO \S+ watchdog found", re.MULTILINE)


class DrippingReceiver:
    """Takes each request, then sends one byte a second until the client hangs up."""

    def __init__(self, tick_s: float = 1.0) -> None:
        self.tick_s = tick_s
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=512)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.accepted = 0
        self.durations: list[float] = []
        self.intervals: list[tuple[float, float]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.accepted += 1
            threading.Thread(target=self._drip, args=(conn, time.monotonic()), daemon=True).start()

    def _drip(self, conn: socket.socket, since: float) -> None:
        with conn:
            try:
                while True:
                    readable, _, _ = selectors.select([conn], [], [], self.tick_s)
                    if readable and not conn.recv(65536):
                        break  # the sender hung up
                    if not readable:
                        conn.sendall(b"H")
            except OSError:
                pass
        with self.lock:
            self.durations.append(time.monotonic() - since)
            self.intervals.append((since, time.monotonic()))

    def peak(self, lag_s: float = 0.05) -> int:
        """Most connections open at once. A hang-up is seen only when its thread runs, so
        a connection closed within lag_s after another was accepted counts as closed."""
        events = sorted(
            [(start, 1) for start, _ in self.intervals]
            + [(end - lag_s, -1) for _, end in self.intervals]
        )
        level = peak = 0
        for _, step in events:
            level += step
            peak = max(peak, level)
        return peak

    def close(self) -> None:
        self.listener.close()


def watchdog_gaps(logs: str, since: float) -> list[float]:
    """Seconds between consecutive watchdog passes after since, over every worker's log."""
    times = sorted(
        t
        for stamp in PASS_LINE.findall(logs)
        if (t := datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()) >= since
    )
    return [b - a for a, b in itertools.pairwise(times)]


def idle_in_transaction(stack) -> int | None:
    """Connections idle inside a transaction for over a second (None on SQLite)."""
    with stack.sessions() as s:
        if s.get_bind().dialect.name != "postgresql":
            return None
        return s.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND state = 'idle in transaction' AND now() - state_change > interval '1 s'"
            )
        )


def in_flight(stack, ids: list[str]) -> int:
    """The tenant's callbacks whose delivery holds its lease now (the database's view)."""
    with stack.sessions() as s:
        return s.scalar(
            select(func.count())
            .select_from(Job)
            .where(Job.id.in_(ids), Job.callback_lease_until > db_now())
        )


def submit(stack, n: int, headers: dict, callback_url: str | None = None) -> str:
    texts = sentences(1, seed=n)
    body = {"source_lang": "en", "target_lang": "de", "segments": texts}
    if callback_url:
        body["callback_url"] = callback_url
    response = stack.client.post("/v1/jobs", json=body, headers=headers)
    assert response.status_code == 202, response.get_json()
    job_id = response.get_json()["id"]
    stack.texts[job_id] = texts
    return job_id


def test_a_dripping_receiver_cannot_stall_the_cluster(make_stack, reference, report):
    receiver = DrippingReceiver()
    overrides = {"callback_allow_hosts": "127.0.0.1", "rate_submit": "off"}
    stack = make_stack(env=ENV, app_overrides={**overrides, "quota_jobs_in_flight": 0})
    with stack.app.extensions["stapel"].sessions() as s:
        other = {"Authorization": f"Bearer {create_key(s, 'other-tenant')[1]}"}
    stack.start_beat()
    procs = stack.launch(
        ("pool", None, 16, {}), ("control", "control", 2, {}), ("hooks", "callbacks", 8, {})
    )
    try:
        figures = _flood(stack, receiver, other, procs, reference)
    finally:
        receiver.close()
    report(figures)
    notes = figures.notes
    assert figures.succeeded == figures.submitted, stack.logs()[-4000:]
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    assert notes["max_in_flight_in_db"] <= TENANT_CAP
    assert notes["max_in_flight_at_receiver"] <= TENANT_CAP
    # every exchange ended by its deadline (it starts before the connect), plus slack
    assert notes["delivery_s"]["max"] < CALLBACK_DEADLINE_S + 1.5
    assert 0 <= notes["attempts_counted"] - notes["connections"] <= TENANT_CAP
    assert notes["deliveries_run_by_translating_worker"] == 0
    assert notes["idle_in_transaction_max"] in (None, 0)
    # one pass a second, with slack for a busy 2-core machine translating 300 jobs
    assert notes["watchdog_gap_s"]["max"] < WATCHDOG_S + 4


def _flood(stack, receiver, other, procs, reference):
    url = f"http://127.0.0.1:{receiver.port}/hook"
    probe_ids = [submit(stack, 10_000, other)]  # loads the model
    stack.wait_done(probe_ids)
    before_at = time.monotonic()
    probe_ids.append(submit(stack, 10_002, other))
    before_s = stack.wait_done(probe_ids[-1:]) - before_at
    flood_at, flood_wall = time.monotonic(), time.time()
    flood = [submit(stack, n, stack.auth, callback_url=url) for n in range(JOBS)]
    probe_at = time.monotonic()
    probe_ids.append(submit(stack, 10_001, other))
    probe_s = stack.wait_done(probe_ids[-1:]) - probe_at
    translated_at = stack.wait_done(flood)
    idle, leased = [], []

    def enough_attempts() -> bool:
        idle.append(idle_in_transaction(stack))
        leased.append(in_flight(stack, flood))
        return len(receiver.durations) >= 3 * TENANT_CAP

    wait_for(enough_attempts, timeout=DEADLINE_S, interval=0.1, what="three rounds of deliveries")
    with stack.sessions() as s:
        attempts = s.scalar(select(func.sum(Job.callback_attempts)).where(Job.id.in_(flood)))
        connections = receiver.accepted
    ids = probe_ids + flood
    figures = stack.verify("slow_callback_receiver", ids, reference)
    durations = sorted(receiver.durations)
    gaps = watchdog_gaps(stack.logs(), flood_wall)
    figures.recover_s = round(translated_at - flood_at, 2)
    figures.notes = {
        "jobs_with_callback": JOBS,
        "callback_deadline_s": CALLBACK_DEADLINE_S,
        "tenant_cap": TENANT_CAP,
        "connections": connections,
        "attempts_counted": int(attempts or 0),
        "max_in_flight_at_receiver": receiver.peak(),
        "max_in_flight_in_db": max(leased),
        "delivery_s": {
            "min": round(durations[0], 2),
            "median": round(statistics.median(durations), 2),
            "max": round(durations[-1], 2),
        },
        "watchdog_gap_s": {"median": round(statistics.median(gaps), 2), "max": round(max(gaps), 2)},
        "other_tenant_job_before_flood_s": round(before_s, 2),
        "other_tenant_job_during_flood_s": round(probe_s, 2),
        "flood_translated_s": round(translated_at - flood_at, 2),
        "deliveries_run_by_translating_worker": procs["pool"]
        .full_log()
        .count("Task stapel.deliver_callback["),
        "idle_in_transaction_max": max(idle) if idle[0] is not None else None,
    }
    return figures
