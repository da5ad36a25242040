"""Quotas and bills outlive Redis: the database's row of the day is their truth."""

from __future__ import annotations

import io

from tests.factories import job_body
from tests.security.conftest import key_for


def test_a_redis_that_lost_its_data_resets_no_quota(make_app, redis_client):
    app = make_app(quota_segments_per_day=10)
    client, acme = app.test_client(), key_for(app, "acme")
    texts = [f"sentence {n}." for n in range(6)]
    assert client.post("/v1/jobs", headers=acme, json=job_body(texts)).status_code == 202

    redis_client.flushdb()  # what a restart without persistence leaves

    usage = client.get("/v1/usage", headers=acme).get_json()
    assert usage["segments_today"] == 6
    refused = client.post("/v1/jobs", headers=acme, json=job_body(texts))
    assert refused.status_code == 429
    assert refused.get_json()["error"]["code"] == "quota_segments_per_day"
    assert "6 used today" in refused.get_json()["error"]["message"]
    four = client.post("/v1/jobs", headers=acme, json=job_body(texts[:4]))
    assert four.status_code == 202
    assert client.get("/v1/usage", headers=acme).get_json()["segments_today"] == 10


def test_a_redis_that_lost_its_data_keeps_the_bill(make_app, redis_client):
    app = make_app(quota_characters_per_day=100)
    client = app.test_client()
    deepl = {
        "Authorization": key_for(app, "acme")["Authorization"].replace("Bearer", "DeepL-Auth-Key")
    }
    text = "The old man sees the dog.\nThe dog sees the man.\n"

    def upload():
        return client.post(
            "/deepl/v2/document",
            headers=deepl,
            data={
                "target_lang": "DE",
                "source_lang": "EN",
                "file": (io.BytesIO(text.encode()), "a.txt"),
            },
            content_type="multipart/form-data",
        )

    assert upload().status_code == 200
    billed = client.get("/deepl/v2/usage", headers=deepl).get_json()["character_count"]
    assert billed > 0

    redis_client.flushdb()

    assert client.get("/deepl/v2/usage", headers=deepl).get_json()["character_count"] == billed
    assert upload().status_code == 200
    assert client.get("/deepl/v2/usage", headers=deepl).get_json()["character_count"] == 2 * billed
