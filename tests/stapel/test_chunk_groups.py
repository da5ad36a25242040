"""Claims and finishes of a group of chunks: one transaction, each chunk its own outcome."""

from __future__ import annotations

import threading

from sqlalchemy import update

from stapel import chunk_groups as groups
from stapel import chunks as ch
from stapel.chunk_groups import Finish
from stapel.db import make_session_factory
from stapel.states import ChunkOutcome, Status
from stapel.tables import Chunk, Job
from tests.factories import wait_for
from tests.stapel.test_jobs import chunk_ids, make_job
from workers.committer import Group


def _one_chunk_jobs(session, count: int) -> list[tuple[str, str]]:
    """(job id, chunk id) of count one-chunk jobs of one segment."""
    made = [make_job(session, n=1, chunk=1)[1] for _ in range(count)]
    return [(job.id, chunk_ids(session, job.id)[0]) for job in made]


def test_a_group_claims_only_the_queued_chunks_each_with_its_own_token(any_session):
    jobs = _one_chunk_jobs(any_session, 4)
    taken = ch.claim_chunk(any_session, jobs[0][1], "other")  # claimed elsewhere first
    assert taken is not None
    ids = [chunk for _, chunk in jobs] + ["no-such-chunk"]

    won = groups.claim_chunks(any_session, ids, "w")

    assert sorted(won) == sorted(chunk for _, chunk in jobs[1:])
    tokens = {claim.token for claim, _ in won.values()}
    assert len(tokens) == 3 and taken.token not in tokens
    for chunk_id, (claim, pending) in won.items():
        row = any_session.get(Chunk, chunk_id)
        any_session.refresh(row)
        assert (row.status, row.claim_token, row.worker) == ("running", claim.token, "w")
        assert pending == [(0, "seg 0-0")] and claim.attempt == 1
        assert any_session.get(Job, claim.job_id).status == Status.RUNNING
    assert groups.claim_chunks(any_session, ids, "w") == {}  # nothing queued is left


def test_a_group_finishes_each_chunk_under_its_own_claim(any_session):
    singles = _one_chunk_jobs(any_session, 3)
    _, pair = make_job(any_session, n=2, chunk=1)
    ids = [chunk for _, chunk in singles] + chunk_ids(any_session, pair.id)
    won = groups.claim_chunks(any_session, ids, "w")
    claims = [won[chunk_id][0] for chunk_id in ids]
    lost = claims[1]  # the watchdog requeued this one meanwhile
    any_session.execute(
        update(Chunk).where(Chunk.id == lost.chunk_id).values(status="queued", claim_token=None)
    )
    any_session.commit()

    outcomes = groups.finish_chunks(
        any_session, [Finish(c, [(c.first, f"t{n}", "mt", "fp")]) for n, c in enumerate(claims)]
    )

    assert outcomes == [
        ChunkOutcome.JOB_SUCCEEDED,
        ChunkOutcome.LOST,
        ChunkOutcome.JOB_SUCCEEDED,
        # both of the pair's chunks end in this group: the first that sees them all
        # succeeded ends the job (its callback is sent once), the other only its chunk
        ChunkOutcome.JOB_SUCCEEDED,
        ChunkOutcome.CHUNK_SUCCEEDED,
    ]
    any_session.expire_all()
    job = any_session.get(Job, singles[0][0])
    assert (job.status, job.segments_done, job.segments_from_mt) == ("succeeded", 1, 1)
    assert any_session.get(Job, singles[1][0]).status == Status.RUNNING
    assert any_session.get(Job, pair.id).status == Status.SUCCEEDED
    chunk = any_session.get(Chunk, claims[0].chunk_id)
    assert (chunk.status, chunk.done, chunk.from_mt, chunk.from_cache) == ("succeeded", 1, 1, 0)
    # a re-run after a lost answer counts as its own success, and writes nothing twice
    again = groups.finish_chunks(any_session, [Finish(claims[0], [(0, "other")])])
    assert again == [ChunkOutcome.JOB_SUCCEEDED]


def test_a_group_that_raises_runs_its_requests_alone(session):
    """One request that fails alone fails alone: the others get their results."""

    def run(_session, numbers: list[int]) -> list[int]:
        if 13 in numbers:
            raise ValueError("bad request in the group")
        return [n * 2 for n in numbers]

    group = Group("test", make_session_factory(session.get_bind()), run)
    release = threading.Event()
    results: dict[int, object] = {}

    def ask(n: int) -> None:
        try:
            results[n] = group.submit(n)
        except ValueError as exc:
            results[n] = exc

    first = threading.Thread(target=ask, args=(1,))
    # hold the group's thread on its first request, so the next three form one group
    original = group.run
    group.run = lambda s, r: (release.wait(10), original(s, r))[1]
    first.start()
    wait_for(lambda: group.groups == 1, timeout=10, what="the first group to start")
    rest = [threading.Thread(target=ask, args=(n,)) for n in (2, 13, 4)]
    for thread in rest:
        thread.start()
    wait_for(lambda: len(group._waiting) == 3, timeout=10, what="three requests waiting")
    release.set()
    for thread in [first, *rest]:
        thread.join(10)

    assert results[1] == 2 and results[2] == 4 and results[4] == 8
    assert isinstance(results[13], ValueError)
    assert group.groups == 5  # the first, the group of three, then its three alone


def test_under_load_a_group_lingers_for_company_but_not_for_an_urgent_request(session, monkeypatch):
    monkeypatch.setattr("workers.committer.LINGER_S", 60.0)
    monkeypatch.setattr("workers.committer.BUSY_S", 60.0)  # every group counts as under load
    group = Group("test", make_session_factory(session.get_bind()), lambda _s, r: list(r))
    assert group.submit(1) == 1  # idle: at once; the next group counts as under load
    results: dict[int, int] = {}
    waiting = threading.Thread(target=lambda: results.update({2: group.submit(2)}))
    waiting.start()
    wait_for(lambda: group._waiting, timeout=10, what="a request lingering")
    assert 2 not in results  # it waits for company (up to LINGER_S)
    assert group.submit(3, urgent=True) == 3  # a caller waits: the group runs now
    waiting.join(10)
    assert results == {2: 2} and group.requests == 3 and group.groups == 2
