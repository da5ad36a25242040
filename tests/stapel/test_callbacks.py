"""Callbacks: pending on every ending, signed, retried with backoff, given up, never twice."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from stapel import callbacks, jobs
from stapel import chunks as ch
from stapel.keys import get_or_create_tenant
from stapel.states import ChunkOutcome
from stapel.tables import Chunk, Job, Tenant, utcnow
from stapel.watchdog import reconcile


def finished_job(session, callback_url="http://127.0.0.1:9/hook"):
    tenant = get_or_create_tenant(session, "acme").id
    job, _ = jobs.create_job(
        session,
        tenant,
        jobs.JobSpec(
            "en",
            "de",
            [jobs.DocumentSpec(None, ["a"])],
            callback_url=callback_url,
            metadata={"ticket": 1},
        ),
        gpu_threshold=100,
        chunk_segments=10,
    )
    claim = ch.claim_chunk(
        session, session.scalar(select(Chunk.id).where(Chunk.job_id == job.id)), "w"
    )
    ch.record_batch(session, claim, [(0, "A")])
    assert ch.finish_chunk(session, claim) == ChunkOutcome.JOB_SUCCEEDED
    session.expire_all()
    return session.get(Job, job.id)


class Receiver:
    """Records posts and answers with the given statuses (an exception type raises)."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    def __call__(self, url, body, headers):
        self.calls.append((url, body, headers))
        answer = self.answers.pop(0)
        if isinstance(answer, type):
            raise answer("down")
        return answer


def test_ending_marks_pending_only_with_url(session):
    assert finished_job(session).callback_status == "pending"
    assert finished_job(session, callback_url=None).callback_status is None


def test_delivery_is_signed_with_tenant_secret(session):
    job = finished_job(session)
    receiver = Receiver(204)
    assert callbacks.deliver(session, job.id, receiver) == ("delivered", 0.0)
    url, body, headers = receiver.calls[0]
    secret = session.scalar(select(Tenant.callback_secret))
    assert url == job.callback_url
    assert callbacks.verify(secret, body, headers[callbacks.SIGNATURE_HEADER])
    assert not callbacks.verify("other-secret", body, headers[callbacks.SIGNATURE_HEADER])
    assert b'"status":"succeeded"' in body and b'"ticket":1' in body
    assert callbacks.deliver(session, job.id, receiver) == ("skipped", 0.0)
    assert len(receiver.calls) == 1


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [(500, "retry"), (302, "retry"), (ConnectionError, "retry"), (200, "delivered")],
)
def test_one_attempt(session, answer, outcome):
    job = finished_job(session)
    assert callbacks.deliver(session, job.id, Receiver(answer))[0] == outcome


def test_retries_back_off_then_give_up(session):
    job = finished_job(session)
    receiver = Receiver(*[500] * callbacks.MAX_ATTEMPTS)
    delays = []
    for _ in range(callbacks.MAX_ATTEMPTS - 1):
        outcome, delay = callbacks.deliver(session, job.id, receiver)
        assert outcome == "retry"
        delays.append(delay)
    assert delays == sorted(delays) and delays[0] == 2.0
    assert callbacks.deliver(session, job.id, receiver)[0] == "failed"
    session.expire_all()
    assert session.get(Job, job.id).callback_status == "failed"


def test_watchdog_resends_due_callback_once(session):
    job = finished_job(session)
    session.execute(update(Job).values(callback_next_at=utcnow() - timedelta(seconds=1)))
    session.commit()
    kwargs = dict(
        now=utcnow(), heartbeat_timeout_s=60, max_attempts=3, grace_s=5, live_task_ids=set()
    )
    assert reconcile(session, **kwargs).callbacks == [job.id]
    assert reconcile(session, **kwargs).callbacks == []  # leased, not sent twice


def test_cancel_and_failure_also_call_back(session):
    tenant = get_or_create_tenant(session, "acme").id
    spec = jobs.JobSpec(
        "en", "de", [jobs.DocumentSpec(None, ["a"])], callback_url="https://example.com/h"
    )
    cancelled, _ = jobs.create_job(session, tenant, spec, gpu_threshold=9, chunk_segments=9)
    assert jobs.cancel_job(session, tenant, cancelled.id).callback_status == "pending"
    failed, _ = jobs.create_job(session, tenant, spec, gpu_threshold=9, chunk_segments=9)
    assert ch.fail_job(session, failed.id, "broken")
    session.expire_all()
    assert session.get(Job, failed.id).callback_status == "pending"


def test_tenant_secret_cli(runner, app):
    with app.extensions["stapel"].sessions() as s:
        secret = get_or_create_tenant(s, "acme").callback_secret
        s.commit()
    assert runner.invoke(args=["tenants", "secret", "acme"]).output.strip() == secret
    assert runner.invoke(args=["tenants", "secret", "nobody"]).exit_code != 0
