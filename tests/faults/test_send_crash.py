"""The API crashes between committing a job and sending its tasks: the watchdog sends it."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import select

from stapel.tables import Chunk
from tests.factories import wait_for
from tests.faults.harness import DEADLINE_S, SHORT_ENV

pytestmark = [pytest.mark.fault, pytest.mark.slow]


def test_job_committed_but_never_sent_is_sent_by_the_watchdog(
    make_stack, reference, report, monkeypatch
):
    stack = make_stack()
    stack.start("a")
    # the crash: the rows are committed, then the process dies before send_task
    monkeypatch.setattr("stapel.dispatch.send_chunk", lambda *_args, **_kwargs: False)
    ids = stack.submit([200, 200, 200])
    crashed_at = time.monotonic()
    with stack.sessions() as s:
        # the first send is recorded with the insert: these task ids never reached Redis
        recorded = set(s.scalars(select(Chunk.task_id).where(Chunk.job_id.in_(ids))))
    assert len(recorded) == len(ids)

    def all_sent():
        with stack.sessions() as s:
            task_ids = set(s.scalars(select(Chunk.task_id).where(Chunk.job_id.in_(ids))))
        return not task_ids & recorded  # each chunk sent again under a new task id

    wait_for(all_sent, timeout=DEADLINE_S, interval=0.05, what="the watchdog to send them")
    sent_after = time.monotonic() - crashed_at
    finished_at = stack.wait_done(ids)
    figures = stack.verify("crash_between_commit_and_send", ids, reference)
    figures.recover_s = round(finished_at - crashed_at, 2)
    figures.notes = {
        "sent_after_s": round(sent_after, 2),
        "grace_s": float(SHORT_ENV["STAPEL_REQUEUE_GRACE_S"]),
        "watchdog_s": float(SHORT_ENV["STAPEL_WATCHDOG_S"]),
    }
    report(figures)

    assert figures.succeeded == len(ids), stack.logs()[-4000:]
    assert (figures.lost, figures.wrong, figures.duplicated) == (0, 0, 0)
    assert figures.attempts_max == 1
    # grace (1 s) + one watchdog period (1 s), plus slack for a busy 2-core machine
    assert sent_after < 1 + 1 + 8
