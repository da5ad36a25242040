"""A job the MT cache answers whole is stored as ended at submit; any doubt sends it on."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from stapel import jobs, mtcache, quotas, submit
from stapel.formats.inline import marker
from stapel.keys import create_key
from stapel.presence import Room
from stapel.scores import Scored
from stapel.tables import Chunk, Job, Segment
from tests.faults.harness import stuck_jobs

FP = "f" * 16
TEXTS = ["the house is small.", "we see trees.  she reads books.", "the house is small."]
TARGETS = {"the house is small.": "Das Haus ist klein.", "we see trees.  she reads books.": "X."}


@pytest.fixture
def ext(app):
    return app.extensions["stapel"]


@pytest.fixture
def tenants(ext):
    with ext.sessions() as s:
        return create_key(s, "acme")[0].tenant_id, create_key(s, "globex")[0].tenant_id


def learn(
    ext, tenant: str, fp: str = FP, texts: dict[str, str] = TARGETS, score: float = 0.9
) -> None:
    """Store what a worker with fingerprint fp stores after translating texts (each with
    its model's score)."""
    entries = {
        mtcache.segment_key("en-de", True, src): Scored(tgt, score) for src, tgt in texts.items()
    }
    with ext.sessions() as s:
        mtcache.store(s, mtcache.scope(tenant, ext.settings.cache_shared), fp, entries)
        s.commit()


def send(ext, tenant: str, texts: list[str], room=None, settings=None, **spec) -> Job:
    room = Room({}, {"cpu.en-de": FP}) if room is None else room
    job_spec = jobs.JobSpec("en", "de", [jobs.DocumentSpec(None, texts)], **spec)
    with ext.sessions() as s:
        got = submit.submit(
            s, ext.redis, ext.celery, room, settings or ext.settings, tenant, job_spec
        ).job
        s.expunge(got)
        return got


def rows(ext, job_id: str):
    with ext.sessions() as s:
        segments = s.execute(
            select(Segment.target, Segment.origin, Segment.fingerprint)
            .where(Segment.job_id == job_id)
            .order_by(Segment.idx)
        ).all()
        chunks = s.execute(
            select(Chunk.status, Chunk.done, Chunk.from_cache, Chunk.task_id).where(
                Chunk.job_id == job_id
            )
        ).all()
        return [tuple(r) for r in segments], [tuple(c) for c in chunks], stuck_jobs(s)


def test_a_fully_cached_job_ends_at_submit_with_its_provenance(ext, tenants):
    learn(ext, tenants[0])
    job = send(ext, tenants[0], [*TEXTS, "  "], callback_url="https://example.com/hook")
    assert (job.status, job.segments_done, job.segments_from_cache) == ("succeeded", 4, 3)
    assert job.finished_at is not None and job.callback_status == "pending"  # due at once
    segments, chunks, stuck = rows(ext, job.id)
    expected = [(TARGETS[t], "cache", FP) for t in TEXTS] + [("  ", None, None)]
    assert segments == expected
    assert chunks == [("succeeded", 4, 3, None)]  # nothing was sent for it
    assert not stuck


@pytest.mark.parametrize(
    ("min_score", "below", "targets", "review"),
    [
        (None, "empty", [TARGETS[t] for t in TEXTS], 0),
        (0.5, "empty", [TARGETS[t] for t in TEXTS], 0),
        (0.9, "empty", [TARGETS[t] for t in TEXTS], 0),  # under, not at
        (0.95, "empty", ["", "", ""], 3),
        (0.95, "source", TEXTS, 3),
    ],
)
def test_a_cached_answer_carries_its_scores_and_sends_the_weak_ones_to_review(
    ext, tenants, min_score, below, targets, review
):
    learn(ext, tenants[0], score=0.9)
    job = send(ext, tenants[0], [*TEXTS, " "], min_score=min_score, below_min_score=below)
    assert (job.status, job.segments_done, job.segments_review) == ("succeeded", 4, review)
    with ext.sessions() as s:
        stored = s.execute(
            select(Segment.target, Segment.score, Segment.review)
            .where(Segment.job_id == job.id)
            .order_by(Segment.idx)
        ).all()
        counts = s.execute(select(Chunk.review, Chunk.under_30, Chunk.under_70)).one()
    assert [tuple(r) for r in stored] == [
        *((t, 0.9, review > 0) for t in targets),
        (" ", None, False),  # a blank segment has no score and is never sent to review
    ]
    assert tuple(counts) == (review, 0, 0)


@pytest.mark.parametrize(
    ("case", "texts", "room", "spec"),
    [
        ("one segment not cached", [*TEXTS, "new text."], None, {}),
        ("no fingerprint agreed", TEXTS, Room({}, {}), {}),
        ("another model", TEXTS, Room({}, {"cpu.en-de": "0" * 16}), {}),
        ("a hand-back's plain room", TEXTS, {}, {}),
        ("the job turns the cache off", TEXTS, None, {"use_cache": False}),
        ("split differently", TEXTS, None, {"split_sentences": False}),
    ],
)
def test_any_doubt_sends_the_job_to_a_worker(ext, tenants, case, texts, room, spec):
    learn(ext, tenants[0])
    job = send(ext, tenants[0], texts, room, **spec)
    assert job.status == "queued", case
    segments, chunks, _ = rows(ext, job.id)
    assert {target for target, _, _ in segments} == {None}
    assert chunks[0][0] == "queued" and chunks[0][3] is not None  # sent under its task id


def test_a_segment_with_inline_codes_is_answered_with_its_codes_as_a_worker_placed_them(
    ext, tenants
):
    tagged = f"the {marker('open', 1)}house{marker('close', 1)} is small."
    placed = f"Das {marker('open', 1)}Haus{marker('close', 1)} ist klein."
    learn(ext, tenants[0], texts={tagged: placed})
    job = send(ext, tenants[0], [tagged])
    assert job.status == "succeeded"
    assert rows(ext, job.id)[0] == [(placed, "cache", FP)]


def test_a_tenant_is_answered_only_from_its_own_scope_unless_the_operator_shares_it(ext, tenants):
    acme, globex = tenants
    learn(ext, acme)
    assert send(ext, globex, TEXTS).status == "queued"
    shared = ext.settings.replace(cache_shared=True)
    learn(ext, mtcache.SHARED_SCOPE)
    assert send(ext, globex, TEXTS, settings=shared).status == "succeeded"


def test_a_job_that_names_a_memory_is_left_to_the_worker(ext, tenants, client, api_key):
    learn(ext, tenants[0])
    tmx = (
        '<?xml version="1.0"?><tmx version="1.4"><header srclang="en" segtype="sentence" '
        'datatype="plaintext" adminlang="en" creationtool="t" creationtoolversion="1" '
        'o-tmf="t"/><body><tu><tuv xml:lang="en"><seg>the house is small.</seg></tuv>'
        '<tuv xml:lang="de"><seg>Das Haus ist klein.</seg></tuv></tu></body></tmx>'
    )
    memory = client.post(
        "/v1/memories?source_lang=en&target_lang=de",
        data=tmx,
        headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/x-tmx+xml"},
    ).get_json()
    job = send(ext, tenants[0], TEXTS, memories=(memory["id"],))  # api_key is acme's
    assert job.status == "queued"


def test_a_cached_answer_is_never_in_flight_but_counts_on_the_day(ext, tenants):
    """At its jobs-in-flight limit a tenant still gets what the cache answers (the job is
    never queued or running), and the day's segments count it like any job."""
    acme = tenants[0]
    learn(ext, acme)
    limited = ext.settings.replace(quota_jobs_in_flight=1, quota_segments_per_day=8)
    queued = send(ext, acme, ["not cached yet."], settings=limited)
    assert queued.status == "queued"  # the one job in flight
    with pytest.raises(quotas.QuotaExceeded, match="jobs queued or running"):
        send(ext, acme, ["also new."], settings=limited)
    answered = send(ext, acme, TEXTS, settings=limited)
    assert answered.status == "succeeded"
    assert not ext.redis.zcard(quotas.pending_key(acme)), "no place left among the pending"
    with ext.sessions() as s:
        usage = quotas.usage(ext.redis, s, acme, segments_limit=8, jobs_limit=1)
    assert (usage.segments_today, usage.jobs_in_flight) == (1 + 3, 1)
    with pytest.raises(quotas.QuotaExceeded, match="segments per day"):
        send(ext, acme, [*TEXTS, *TEXTS[:2]], settings=limited)  # 5 more than the 8


@pytest.mark.slow
def test_a_multilingual_models_pair_is_answered_under_its_own_fingerprint(
    ext, tenants, tiny_nllb, tmp_path
):
    root = tmp_path / "root"
    root.mkdir()
    (root / "nllb").symlink_to(tiny_nllb[0])
    settings = ext.settings.replace(model_root=root)
    room = Room({"cpu.nllb": 4000}, {"cpu.nllb": FP})  # its workers agree on the model
    learn(ext, tenants[0], mtcache.pair_fingerprint(FP, "en", "fr"))  # another target's
    job = send(ext, tenants[0], TEXTS, room, settings)
    assert job.status == "queued"  # en-fr's entries never answer en-de
    learn(ext, tenants[0], mtcache.pair_fingerprint(FP, "en", "de"))
    job = send(ext, tenants[0], TEXTS, room, settings)
    assert (job.status, job.segments_from_cache) == ("succeeded", 3)
