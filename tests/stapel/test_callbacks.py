"""Callbacks: due on every ending, leased before the POST, signed with a timestamp, retried
with backoff, given up, within a tenant's cap, never re-POSTed after a database error."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.exc import OperationalError

from stapel import callbacks, db, jobs
from stapel import chunks as ch
from stapel.keys import get_or_create_tenant
from stapel.states import ChunkOutcome
from stapel.tables import Chunk, Job, Tenant, utcnow
from stapel.watchdog import reconcile

WATCHDOG = dict(heartbeat_timeout_s=60, max_attempts=3, grace_s=5, live_task_ids=set())


def finished_job(session, callback_url="http://127.0.0.1:9/hook", tenant="acme"):
    tenant_id = get_or_create_tenant(session, tenant).id
    job, _ = jobs.create_job(
        session,
        tenant_id,
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


def make_due(session, job_id=None):
    """Move the next try (or a lease) into the past: time passing, without a sleep."""
    past = utcnow() - timedelta(seconds=1)
    query = update(Job).values(callback_next_at=past)
    if job_id is not None:
        query = query.where(Job.id == job_id)
    session.execute(query)
    session.commit()


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


def test_ending_makes_the_callback_due_only_with_url(session):
    job = finished_job(session)
    assert (job.callback_status, job.callback_attempts) == ("pending", 0)
    assert job.callback_next_at <= utcnow() + timedelta(seconds=1)
    assert finished_job(session, callback_url=None).callback_status is None


def test_delivery_is_signed_and_carries_its_time_and_attempt(session):
    job = finished_job(session)
    receiver = Receiver(204)
    assert callbacks.deliver(session, job.id, receiver) == ("delivered", 0.0)
    url, body, headers = receiver.calls[0]
    secret = session.scalar(select(Tenant.callback_secret))
    signature = headers[callbacks.SIGNATURE_HEADER]
    assert url == job.callback_url
    assert callbacks.verify(secret, body, signature)
    assert callbacks.verify(secret, body, signature, max_age_s=callbacks.REPLAY_WINDOW_S)
    assert not callbacks.verify("other-secret", body, signature)
    sent = json.loads(body)
    assert (sent["status"], sent["metadata"], sent["attempt"]) == ("succeeded", {"ticket": 1}, 1)
    # a replay: the same body and signature, later than the window, is refused
    later = utcnow() + timedelta(seconds=callbacks.REPLAY_WINDOW_S + 1)
    assert not callbacks.verify(secret, body, signature, max_age_s=300, now=later)
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
        assert callbacks.deliver(session, job.id, receiver)[0] == "skipped"  # not due yet
        delays.append(delay)
        make_due(session, job.id)
    assert delays == sorted(delays) and delays[0] == 2.0
    assert callbacks.deliver(session, job.id, receiver)[0] == "failed"
    session.expire_all()
    assert session.get(Job, job.id).callback_status == "failed"
    assert len(receiver.calls) == callbacks.MAX_ATTEMPTS


def test_the_attempt_and_its_lease_are_taken_before_the_post(session):
    job = finished_job(session)
    seen = {}

    def post(url, body, headers):
        seen["open_transaction"] = session.in_transaction()
        with db.make_session_factory(session.get_bind())() as other:
            row = other.get(Job, job.id)
            seen["attempts"] = row.callback_attempts
            seen["leased"] = row.callback_lease_until > utcnow()
            # a second delivery meanwhile (a duplicate task) finds the callback held
            seen["second"] = callbacks.deliver(other, job.id, Receiver(204))
        return 204

    assert callbacks.deliver(session, job.id, post)[0] == "delivered"
    assert seen == {
        "open_transaction": False,
        "attempts": 1,
        "leased": True,
        "second": ("skipped", 0.0),
    }
    session.expire_all()
    assert session.get(Job, job.id).callback_lease_until is None


def test_a_database_error_after_the_post_never_posts_again(session, monkeypatch):
    job = finished_job(session)
    receiver = Receiver(204, 204)
    monkeypatch.setattr(db, "DB_RETRY_DELAYS", (0.0,))

    def broken(*_args, **_kwargs):
        raise OperationalError("UPDATE jobs", {}, Exception("database went away"))

    with monkeypatch.context() as patch:
        patch.setattr(callbacks, "record", broken)
        assert callbacks.deliver(session, job.id, receiver) == ("unrecorded", 0.0)
    assert len(receiver.calls) == 1
    # held until the lease runs out; then delivered again (at least once)
    assert callbacks.deliver(session, job.id, receiver)[0] == "skipped"
    session.execute(update(Job).values(callback_lease_until=utcnow() - timedelta(seconds=1)))
    session.commit()
    assert callbacks.deliver(session, job.id, receiver)[0] == "delivered"
    assert len(receiver.calls) == 2


def test_a_tenant_has_at_most_its_cap_in_flight(session):
    ours = [finished_job(session).id for _ in range(3)]
    theirs = finished_job(session, tenant="globex").id
    held = [callbacks.lease(session, job_id, hold_s=60, tenant_cap=2) for job_id in ours]
    assert [h is not None for h in held] == [True, True, False]
    assert callbacks.lease(session, theirs, hold_s=60, tenant_cap=2) is not None
    callbacks.record(session, held[0], None)  # one ends: the third may go
    assert callbacks.lease(session, ours[2], hold_s=60, tenant_cap=2) is not None


def test_watchdog_queues_due_callbacks_within_the_cap_and_not_twice(session):
    ours = [finished_job(session).id for _ in range(3)]
    theirs = finished_job(session, tenant="globex").id
    report = reconcile(session, **WATCHDOG, waiting_callbacks=set(), tenant_cap=2)
    assert sorted(report.callbacks) == sorted([*ours[:2], theirs])
    # their tasks wait in the broker now: they count against the cap, none is sent again
    again = reconcile(session, **WATCHDOG, waiting_callbacks=set(report.callbacks), tenant_cap=2)
    assert again.callbacks == [] and again.callbacks_due == 4
    callbacks.lease(session, ours[0], hold_s=60, tenant_cap=2)
    leased = reconcile(session, **WATCHDOG, waiting_callbacks=set(), tenant_cap=2)
    assert sorted(leased.callbacks) == sorted([ours[1], theirs])


def test_watchdog_gives_up_a_last_attempt_whose_lease_ran_out(session):
    job = finished_job(session)
    past = utcnow() - timedelta(seconds=1)
    session.execute(
        update(Job).values(callback_attempts=callbacks.MAX_ATTEMPTS, callback_lease_until=past)
    )
    session.commit()
    assert reconcile(session, **WATCHDOG).callbacks_given_up == 1
    session.expire_all()
    assert session.get(Job, job.id).callback_status == "failed"


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
