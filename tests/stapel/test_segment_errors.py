"""Segments that fail alone, a claim given back untouched, and what the API shows of them."""

from __future__ import annotations

from sqlalchemy import select

from stapel import chunks as ch
from stapel.segment_errors import record_failures, segment_errors
from stapel.states import ChunkOutcome, Status
from stapel.tables import Chunk, Job
from tests.stapel.test_jobs import chunk_ids, make_job


def test_a_failed_segment_is_counted_once_and_not_translated_again(any_session):
    _, job = make_job(any_session, n=4, chunk=4)
    (chunk_id,) = chunk_ids(any_session, job.id)
    claim = ch.claim_chunk(any_session, chunk_id, "w1")
    failure = (2, "input_too_long", "the model could not translate this segment")
    assert record_failures(any_session, claim, [failure]) == 1
    assert record_failures(any_session, claim, [failure]) == 0  # a retried write
    assert [i for i, _ in ch.pending_segments(any_session, claim)] == [0, 1, 3]
    assert ch.record_batch(any_session, claim, [(0, "a"), (1, "b")])
    assert any_session.get(Chunk, chunk_id).done == 3  # ended: two translated, one failed
    assert ch.finish_chunk(any_session, claim, [(3, "d")]) == ChunkOutcome.JOB_SUCCEEDED
    stored = any_session.get(Job, job.id)
    any_session.refresh(stored)
    assert (stored.status, stored.segments_failed, stored.segments_done) == ("succeeded", 1, 4)
    assert segment_errors(any_session, job.id) == {2: failure[1:]}


def test_a_released_claim_is_as_if_never_taken(any_session):
    _, job = make_job(any_session, n=2, chunk=2)
    (chunk_id,) = chunk_ids(any_session, job.id)
    claim = ch.claim_chunk(any_session, chunk_id, "broken@w")
    assert ch.release_claim(any_session, claim)
    chunk = any_session.get(Chunk, chunk_id)
    any_session.refresh(chunk)
    assert (chunk.status, chunk.attempts, chunk.claim_token, chunk.worker) == (
        Status.QUEUED,
        0,
        None,
        None,
    )
    assert any_session.execute(select(Job.status, Job.attempts).where(Job.id == job.id)).one() == (
        Status.QUEUED,
        0,
    )
    assert not ch.release_claim(any_session, claim), "a second release finds no claim"
    again = ch.claim_chunk(any_session, chunk_id, "healthy@w")
    assert again is not None and again.attempt == 1


def test_the_result_shows_failed_segments_as_null_with_their_error(app, client, auth):
    body = {
        "source_lang": "en",
        "target_lang": "de",
        "documents": [{"id": "a", "segments": ["x", "y"]}, {"id": "b", "segments": ["z", "w"]}],
    }
    job = client.post("/v1/jobs", json=body, headers=auth).get_json()
    with app.extensions["stapel"].sessions() as s:
        (chunk_id,) = chunk_ids(s, job["id"])
        claim = ch.claim_chunk(s, chunk_id, "w")
        record_failures(s, claim, [(3, "translation_failed", "the model could not ...")])
        ch.finish_chunk(s, claim, [(0, "X"), (1, "Y"), (2, "Z")])
    status = client.get(job["links"]["self"], headers=auth).get_json()
    assert (status["status"], status["segments_failed"]) == ("succeeded", 1)
    result = client.get(job["links"]["result"], headers=auth).get_json()
    assert result["segments_failed"] == 1
    mt = {"origin": "mt", "model": None, "score": None, "review": False}
    assert result["documents"][0] == {"id": "a", "segments": ["X", "Y"], "provenance": [mt, mt]}
    assert result["documents"][1] == {
        "id": "b",
        "segments": ["Z", None],
        "provenance": [mt, None],
        "errors": [
            {"segment": 1, "code": "translation_failed", "message": "the model could not ..."}
        ],
    }
