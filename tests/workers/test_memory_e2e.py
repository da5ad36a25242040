"""The MT cache and memories with a real worker process and a real model, end to end."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from stapel.presence import agreed_fingerprint
from stapel.tables import Chunk
from tests.factories import sentences, wait_for
from tests.faults.harness import stuck_jobs
from tests.test_e2e import raw_translate
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


def run(client, auth, worker, segments, **fields) -> tuple[dict, dict]:
    """Submit an en-de job, wait for it to succeed; return (status, JSON result)."""
    body = {"source_lang": "en", "target_lang": "de", "segments": segments, **fields}
    created = client.post("/v1/jobs", json=body, headers=auth)
    assert created.status_code == 202, created.get_json()
    return run_link(client, auth, worker, created.get_json()["links"]["self"])


def run_link(client, auth, worker, link: str) -> tuple[dict, dict]:
    """Wait for the job at link to succeed; return (status, JSON result)."""

    def ended():
        state = client.get(link, headers=auth).get_json()
        return state if state["status"] in ("succeeded", "failed") else None

    state = wait_for(ended, timeout=90, what="the job to end")
    assert state["status"] == "succeeded", (state, worker.log())
    result = client.get(f"{link}/result", headers=auth).get_json()
    return state, result


def test_cold_warm_and_cache_off_give_three_identical_results(client, auth, worker, model_root):
    texts = sentences(12) + [sentences(12)[3], "the dog runs. she reads books.", ""]
    cold, first = run(client, auth, worker, texts)
    warm, second = run(client, auth, worker, texts)
    off, third = run(client, auth, worker, texts, cache=False)
    targets = [r["documents"][0]["segments"] for r in (first, second, third)]
    assert targets[0] == targets[1] == targets[2], worker.log()
    assert targets[0][:12] == raw_translate(model_root / "en-de", texts[:12])  # the model now
    translated = len(texts) - 1  # the blank segment passes through, from nowhere
    assert (cold["segments_from_mt"], cold["segments_from_cache"]) == (translated, 0)
    assert (warm["segments_from_mt"], warm["segments_from_cache"]) == (0, translated)
    assert (off["segments_from_mt"], off["segments_from_cache"], off["cache"]) == (
        translated,
        0,
        False,
    )
    provenance = second["documents"][0]["provenance"]
    assert {p["origin"] for p in provenance[:-1]} == {"cache"} and provenance[-1] is None
    fingerprints = {
        p["model"] for r in (first, second, third) for p in r["documents"][0]["provenance"][:-1]
    }
    assert len(fingerprints) == 1 and len(next(iter(fingerprints))) == 16


def test_a_job_translated_before_is_answered_at_submit_as_a_worker_would(
    app, client, auth, other_key, worker, model_root
):
    texts = sentences(6, seed=5) + ["the dog runs.  she reads books. ", " "]
    cold, first = run(client, auth, worker, texts)
    assert cold["segments_from_mt"] == len(texts) - 1
    ext = app.extensions["stapel"]
    # the model's fingerprint reaches the web with the worker's next presence record
    fp = wait_for(
        lambda: agreed_fingerprint(ext.served.get(), "cpu.en-de"), timeout=30, what="presence"
    )
    assert fp == first["documents"][0]["provenance"][0]["model"]
    body = {"source_lang": "en", "target_lang": "de", "segments": texts}
    warm = client.post("/v1/jobs", json=body, headers=auth).get_json()
    assert warm["status"] == "succeeded", warm  # ended as it was stored: no worker took it
    assert (warm["segments_from_cache"], warm["segments_from_mt"]) == (len(texts) - 1, 0)
    second = client.get(f"/v1/jobs/{warm['id']}/result", headers=auth).get_json()
    assert second["documents"][0]["segments"] == first["documents"][0]["segments"]
    provenance = second["documents"][0]["provenance"]
    assert provenance[-1] is None  # the blank segment passes through, as a worker gives it
    assert {(p["origin"], p["model"]) for p in provenance[:-1]} == {("cache", fp)}
    # Not answered at submit, each for its reason, and translated the same way by a worker:
    # the cache off; another tenant (its own scope); a memory named; a segment never seen.
    memory = client.post(
        "/v1/memories?source_lang=en&target_lang=de",
        data=TMX,
        headers={**auth, "Content-Type": "application/x-tmx+xml"},
    ).get_json()
    other = {"Authorization": f"Bearer {other_key}"}
    new = ["he writes green books today."]
    for headers, fields, segments in [
        (auth, {"cache": False}, texts),
        (other, {}, texts),
        (auth, {"memories": [memory["id"]]}, texts),
        (auth, {}, texts[:3] + new),
    ]:
        posted = client.post(
            "/v1/jobs", json={**body, **fields, "segments": segments}, headers=headers
        )
        assert posted.get_json()["status"] == "queued", (fields, segments)
        state, result = run_link(client, headers, worker, posted.get_json()["links"]["self"])
        assert result["documents"][0]["segments"][:3] == first["documents"][0]["segments"][:3]
    assert state["segments_from_cache"] == 3  # the worker's own lookup answered the rest
    with ext.sessions() as s:
        assert not stuck_jobs(s)
        ended = s.execute(
            select(Chunk.status, Chunk.done, Chunk.end_segment - Chunk.first_segment).where(
                Chunk.job_id == warm["id"]
            )
        ).all()
    assert ended and all(status == "succeeded" and done == size for status, done, size in ended)


TMX = (
    '<?xml version="1.0"?><tmx version="1.4"><header srclang="en-US" segtype="sentence" '
    'datatype="plaintext" adminlang="en" creationtool="t" creationtoolversion="1" o-tmf="t"/>'
    '<body><tu><tuv xml:lang="en-US"><seg>the house   is small.</seg></tuv>'
    '<tuv xml:lang="de-DE"><seg>Das Haus ist <hi>klein</hi>.</seg></tuv></tu></body></tmx>'
)


def test_a_memory_wins_for_its_tenant_and_never_answers_another(client, auth, other_key, worker):
    other = {"Authorization": f"Bearer {other_key}"}
    memory = client.post(
        "/v1/memories?source_lang=en&target_lang=de",
        data=TMX,
        headers={**auth, "Content-Type": "application/x-tmx+xml"},
    ).get_json()
    texts = ["the house is small.", "we see green trees."]
    mixed = "we see green trees.  the house is small."  # a sentence of it in the memory
    mine, result = run(client, auth, worker, [*texts, mixed], memories=[memory["id"]])
    segments = result["documents"][0]["segments"]
    assert segments[0] == "Das Haus ist klein."
    # its other sentence rides on segment 1's in flight: translated once, for both
    assert segments[2] == f"{segments[1]}  Das Haus ist klein."
    origins = [p["origin"] for p in result["documents"][0]["provenance"]]
    assert origins == ["memory", "mt", "mt"]
    assert result["documents"][0]["provenance"][0]["model"] is None
    assert (mine["segments_from_memory"], mine["segments_from_mt"]) == (1, 2)
    # Another tenant, same text: the model (never the memory, nor acme's cache entries).
    theirs, other_result = run(client, other, worker, texts)
    assert other_result["documents"][0]["segments"][0] != "Das Haus ist klein."
    assert (theirs["segments_from_memory"], theirs["segments_from_cache"]) == (0, 0)
    assert theirs["segments_from_mt"] == 2
    exported = client.get(f"/v1/jobs/{mine['id']}/result?format=tmx", headers=auth)
    assert exported.status_code == 200 and "Das Haus ist klein." in exported.get_data(True)
