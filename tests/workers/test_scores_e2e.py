"""Confidence scores with a real worker process and a real model: stored, carried, routed."""

from __future__ import annotations

import statistics

import pytest
from sqlalchemy import select

from stapel.tables import Segment
from tests.factories import sentences
from tests.workers.test_memory_e2e import TMX, run
from tests.workers_proc import stack_worker

pytestmark = pytest.mark.e2e


@pytest.fixture
def worker(app, settings_overrides, tmp_path):
    yield from stack_worker(
        app,
        settings_overrides,
        tmp_path,
        STAPEL_MAX_DECODING_LENGTH="24",
        STAPEL_BATCH_TOKENS="512",
    )


def stored(app, job_id: str) -> list[tuple]:
    """(target, origin, score, review) of the job's segments, in order."""
    with app.extensions["stapel"].sessions() as s:
        rows = s.execute(
            select(Segment.target, Segment.origin, Segment.score, Segment.review)
            .where(Segment.job_id == job_id)
            .order_by(Segment.idx)
        ).all()
    return [tuple(r) for r in rows]


def scores_of(result: dict) -> list[float | None]:
    return [p and p["score"] for p in result["documents"][0]["provenance"]]


def test_every_machine_translation_is_stored_with_its_score_and_a_cache_hit_carries_it(
    app, client, auth, worker
):
    texts = [*sentences(6, seed=3), "the dog runs.", "she reads books.", ""]
    texts.append("the dog runs.  she reads books.")  # two sentences, each riding on one above
    cold, first = run(client, auth, worker, texts)
    rows = stored(app, cold["id"])
    scores = [score for _, _, score, _ in rows]
    assert all(0 < s <= 1 for n, s in enumerate(scores) if n != 8), rows
    assert scores[8] is None and rows[8][1] is None  # a blank segment: no score
    assert scores_of(first) == scores
    assert scores[9] == min(scores[6], scores[7])  # a segment scores its weakest sentence
    assert {o for _, o, _, _ in rows} == {"mt", None} and not any(r for *_, r in rows)
    warm, second = run(client, auth, worker, texts)  # the cache, at submit or on the worker
    assert warm["segments_from_cache"] == len(texts) - 1
    assert scores_of(second) == scores  # each hit carries the score stored with it
    assert [score for *_, score, _ in stored(app, warm["id"])] == scores


def test_min_score_sends_weak_targets_to_review_and_counts_them_never_dropping_one(
    app, client, auth, worker
):
    memory = client.post(
        "/v1/memories?source_lang=en&target_lang=de",
        data=TMX,
        headers={**auth, "Content-Type": "application/x-tmx+xml"},
    ).get_json()
    texts = ["the house is small.", *sentences(5, seed=8)]
    state, result = run(
        client,
        auth,
        worker,
        texts,
        memories=[memory["id"]],
        min_score=1,
        below_min_score="source",
    )
    rows = stored(app, state["id"])
    # a memory's match scores 1, never under min_score; every machine translation is
    assert rows[0] == ("Das Haus ist klein.", "memory", 1.0, False)
    assert [(t, o, r) for t, o, _, r in rows[1:]] == [(t, "mt", True) for t in texts[1:]]
    assert (state["segments_review"], state["segments_done"], state["min_score"]) == (5, 6, 1.0)
    provenance = result["documents"][0]["provenance"]
    assert [p["review"] for p in provenance] == [False] + [True] * 5
    assert result["segments_review"] == 5
    assert result["documents"][0]["segments"] == [rows[0][0], *texts[1:]]  # sources, as asked
    progress = client.get(f"/v1/jobs/{state['id']}/documents", headers=auth).get_json()
    below = sum(s < 0.7 for _, _, s, _ in rows)
    assert progress["scores"] == {
        "below": {
            "0.3": sum(s < 0.3 for _, _, s, _ in rows),
            "0.5": sum(s < 0.5 for _, _, s, _ in rows),
            "0.7": below,
        },
        "review": 5,
    }
    # The same sentences again, now from the cache, each routed by the score it carries.
    cut = statistics.median(s for _, _, s, _ in rows[1:])
    again, cached = run(client, auth, worker, texts[1:], min_score=cut)
    weak = [s < cut for _, _, s, _ in rows[1:]]
    assert any(weak) and not all(weak)
    assert [(o, r) for _, o, _, r in stored(app, again["id"])] == [("cache", w) for w in weak]
    assert [t == "" for t in cached["documents"][0]["segments"]] == weak  # `empty`: the default
    assert again["segments_review"] == sum(weak)
