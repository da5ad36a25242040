"""A long paragraph through the API and a real worker comes back sentence by sentence.

The committed demo model (256 positions, trained on sentences) behind a worker process:
a 5,000-character paragraph of demo sentences, over the model's input limit many times
over, is one segment in and one segment out, every sentence translated as it would be
alone. The API's per-segment limit is raised to 6,000 characters for it.
"""

from __future__ import annotations

import pytest

from app import create_app
from stapel.keys import create_key
from tests.factories import wait_for
from tests.workers.test_isolation import DEMO_MODELS, demo_paragraph
from tests.workers_proc import WorkerProcess
from workers.engine import Engine

pytestmark = pytest.mark.e2e


def test_a_5000_character_paragraph_through_a_worker(
    engine, redis_client, settings_overrides, tmp_path
):
    settings = {**settings_overrides, "model_root": DEMO_MODELS, "max_segment_chars": 6000}
    app = create_app(settings)
    client = app.test_client()
    with app.extensions["stapel"].sessions() as s:
        auth = {"Authorization": f"Bearer {create_key(s, 'acme')[1]}"}
    env = {
        "DATABASE_URL": settings["database_url"],
        "REDIS_URL": settings["redis_url"],
        "STAPEL_MODEL_ROOT": str(DEMO_MODELS),
    }
    worker = WorkerProcess(env, tmp_path).start(app.extensions["stapel"].celery)
    try:
        sentences = demo_paragraph(5000)
        paragraph = " ".join(sentences)
        short = sentences[0]
        job = client.post(
            "/v1/jobs",
            headers=auth,
            json={"source_lang": "en", "target_lang": "de", "segments": [paragraph, short]},
        ).get_json()
        wait_for(
            lambda: (
                client.get(job["links"]["self"], headers=auth).get_json()["status"] == "succeeded"
            ),
            timeout=120,
            what="the paragraph job",
        )
        (document,) = client.get(job["links"]["result"], headers=auth).get_json()["documents"]
        alone = Engine(DEMO_MODELS, max_decoding_length=256).translate("en-de", sentences)
        assert document["segments"] == [" ".join(alone), alone[0]]
    finally:
        worker.stop()
        app.extensions["stapel"].dispose()
