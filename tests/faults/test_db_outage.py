"""The database becomes unreachable for a few seconds: 503 meanwhile, nothing accepted lost.

PostgreSQL is reached through a TCP proxy the test cuts (every open connection closed,
new ones refused) and restores. SQLite is a file opened in-process: there is no server
to lose, so the same outage cannot be made; that case is skipped with the reason.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit, urlunsplit

import pytest
from sqlalchemy import select

from stapel import dispatch
from stapel.tables import Job
from tests.factories import sentences, wait_for
from tests.faults.conftest import fresh_engine
from tests.faults.harness import DEADLINE_S
from tests.faults.procs import TcpProxy

pytestmark = [pytest.mark.fault, pytest.mark.slow]

OUTAGE_S = 4
"""How long the database stays unreachable."""
HEARTBEAT_TIMEOUT_S = 10
"""Longer than the outage: a chunk whose worker waits out the outage is not requeued."""


@pytest.fixture
def proxied_postgres(pg_fault_url):
    """(direct URL, URL through a TCP proxy, the proxy) for the suite's PostgreSQL DB."""
    parts = urlsplit(pg_fault_url)
    proxy = TcpProxy((parts.hostname or "127.0.0.1", parts.port or 5432)).start()
    user = f"{parts.username}@" if parts.username else ""
    proxied = urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))
    yield pg_fault_url, proxied, proxy
    proxy.close()


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_database_outage_answers_503_and_loses_nothing(
    db, request, make_stack, reference, report, monkeypatch
):
    if db == "sqlite":
        pytest.skip(
            "SQLite is a file opened in-process: it cannot become unreachable the "
            "way a database server can; the outage runs against PostgreSQL"
        )
    direct, proxied, proxy = request.getfixturevalue("proxied_postgres")
    engine = fresh_engine(direct)
    try:
        _run(make_stack, engine, proxied, proxy, reference, report, monkeypatch)
    finally:
        engine.dispose()


def _run(make_stack, engine, proxied, proxy, reference, report, monkeypatch) -> None:
    stack = make_stack(
        db_url=proxied,
        engine=engine,
        chunk_segments=200,
        env={"STAPEL_HEARTBEAT_TIMEOUT_S": str(HEARTBEAT_TIMEOUT_S)},
    )
    stack.start("a", "b")
    ids = stack.submit([600, 600, 600])
    wait_for(
        lambda: any(j.segments_done for j in stack.jobs(ids).values()),
        timeout=DEADLINE_S,
        interval=0.05,
        what="translation to start",
    )

    proxy.cut()
    cut_at = time.monotonic()
    during = [
        stack.post_job(sentences(300, seed=9), idempotency_key="during-outage"),
        stack.client.get(f"/v1/jobs/{ids[0]}", headers=stack.auth),
        stack.client.get("/readyz"),
    ]
    time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - cut_at)))  # the outage itself
    proxy.restore()

    for response in during:
        assert response.status_code == 503, response.get_data(as_text=True)
        assert response.headers.get("Retry-After")
    assert during[0].get_json()["error"]["code"] == "database_unavailable"
    # the client retries its refused submission with the same key once the DB is back
    retried = wait_for(
        lambda: (
            (r := stack.post_job(sentences(300, seed=9), "during-outage")).status_code in (200, 202)
            and r
        ),
        timeout=DEADLINE_S,
        what="the retried submission to be accepted",
    )
    ids.append(retried.get_json()["id"])
    late = _lose_db_after_commit(stack, proxy, monkeypatch)
    ids.extend(late["stored"])

    finished_at = stack.wait_done(ids)
    figures = stack.verify("database_outage", ids, reference)
    figures.recover_s = round(finished_at - cut_at, 2)
    figures.notes = {
        "database": "postgresql via a TCP proxy",
        "outage_s": OUTAGE_S,
        "answers_during_outage": [r.status_code for r in during],
        "retried_submission_status": retried.status_code,
        "db_lost_after_commit": {"answer": late["status"], "jobs_stored": len(late["stored"])},
        "worker_db_retries": stack.logs().count("database unavailable, retrying"),
    }
    report(figures)

    assert figures.succeeded == len(ids), stack.logs()[-4000:]
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    assert retried.status_code == 202, "the refused submission was half-stored"


def _lose_db_after_commit(stack, proxy, monkeypatch) -> dict:
    """Drop the DB right after a submission committed and sent, before it records the send.

    Whatever the answer, a job that was stored must run to the end like any other.
    """
    real_send = dispatch.send_chunk

    def send_then_lose_db(celery, message, task_id, pending=None):
        sent = real_send(celery, message, task_id, pending=pending)
        proxy.cut()
        return sent

    with stack.sessions() as s:
        before = set(s.scalars(select(Job.id)))
    monkeypatch.setattr(dispatch, "send_chunk", send_then_lose_db)
    try:
        response = stack.post_job(sentences(100, seed=11))
    finally:
        monkeypatch.setattr(dispatch, "send_chunk", real_send)
        proxy.restore()
    with stack.sessions() as s:
        stored = [j for j in s.scalars(select(Job.id)) if j not in before]
    for job_id in stored:
        stack.texts[job_id] = sentences(100, seed=11)
    return {"status": response.status_code, "stored": stored}
