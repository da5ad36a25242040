"""End to end: a multilingual model folder served over /v1 by a real worker process gives
the family's own reference output for each target, and the cache never answers one
target with another's translation."""

from __future__ import annotations

import pytest
import requests

from tests.factories import wait_for
from tests.families import reference
from tests.workers_proc import ServerThread, WorkerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(autouse=True, scope="module")
def _reference_libraries():
    """Skip where the train extra is missing; imported here, not at collection, so
    the unit tier never loads them."""
    pytest.importorskip("transformers")


TEXTS = ["das Haus ist klein", "ein Hund lief schnell", "hello world"]
STEPS = 12


@pytest.fixture(scope="module")
def nllb(tiny_nllb, tmp_path_factory):
    folder, model, tok = tiny_nllb
    root = tmp_path_factory.mktemp("nllb-root")
    (root / folder.name).symlink_to(folder)
    return root, model, tok


@pytest.fixture
def settings_overrides(settings_overrides, nllb):
    return {**settings_overrides, "model_root": nllb[0]}


@pytest.fixture
def worker(app, settings_overrides, tmp_path):
    env = {
        "DATABASE_URL": settings_overrides["database_url"],
        "REDIS_URL": settings_overrides["redis_url"],
        "STAPEL_MODEL_ROOT": str(settings_overrides["model_root"]),
        "STAPEL_MAX_DECODING_LENGTH": str(STEPS),
        "STAPEL_COMPUTE_TYPE": "float32",
    }
    proc = WorkerProcess(env, tmp_path).start(app.extensions["stapel"].celery)
    yield proc
    proc.stop()


def _translate(url: str, auth: dict, target: str, texts: list[str] = TEXTS) -> dict:
    body = {
        "source_lang": "de",
        "target_lang": target,
        "documents": [{"segments": texts}],
        "split_sentences": False,
    }
    created = requests.post(f"{url}/v1/jobs", json=body, headers=auth, timeout=10)
    assert created.status_code == 202, created.text
    job = created.json()

    def finished():
        state = requests.get(f"{url}{job['links']['self']}", headers=auth, timeout=10).json()
        return state if state["status"] in ("succeeded", "failed") else None

    done = wait_for(finished, timeout=90, what="the job to finish")
    assert done["status"] == "succeeded", done
    result = requests.get(f"{url}{job['links']['result']}", headers=auth, timeout=10)
    return {**result.json()["documents"][0], "at_submit": job["status"], "job": job["id"]}


def test_two_targets_of_one_model_match_the_reference_and_never_share_cache(
    app, worker, auth, nllb
):
    _root, model, tok = nllb
    expected = {
        "fr": reference("nllb", model, tok, TEXTS, "deu_Latn", "fra_Latn", STEPS),
        "en": reference("nllb", model, tok, TEXTS, "deu_Latn", "eng_Latn", STEPS),
    }
    assert expected["fr"] != expected["en"]
    served = app.extensions["stapel"].served
    with ServerThread(app) as server:
        first = {t: _translate(server.url, auth, t) for t in ("fr", "en")}
        # the worker now says it holds the model: its pairs go to the model's own queue
        wait_for(lambda: "cpu.nllb-200-tiny" in served.get().languages, what="presence")
        again = {t: _translate(server.url, auth, t) for t in ("fr", "en")}
        new = _translate(server.url, auth, "fr", ["ein neuer Satz"])
    claimed = [line for line in worker.log().splitlines() if f"logid={new['job']}" in line]
    assert any("queue=cpu.nllb-200-tiny" in line for line in claimed)  # the model's queue
    for target in ("fr", "en"):
        assert first[target]["segments"] == expected[target], worker.log()
        assert again[target]["segments"] == expected[target]
    assert {p["origin"] for p in again["en"]["provenance"]} == {"cache"}
    assert again["en"]["at_submit"] == "succeeded"  # the web answered it under en's key
    models = {t: {p["model"] for p in first[t]["provenance"]} for t in ("fr", "en")}
    assert models["fr"].isdisjoint(models["en"])  # the pair is part of the cache's key
