"""Bad input gets a clear 4xx, a JSON error body, and stores nothing."""

from __future__ import annotations

import io
import json

import pytest
from sqlalchemy import func, select

from stapel.tables import Job
from tests.factories import job_body

LONG = "x" * 4001


def job_count(app) -> int:
    with app.extensions["stapel"].sessions() as s:
        return s.scalar(select(func.count()).select_from(Job))


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (job_body(source_lang="en", target_lang="fr"), 400, "unknown_language_pair"),
        (job_body(segments=[]), 400, "no_segments"),
        (job_body(segments="hello"), 400, "invalid_type"),
        (job_body(segments=["ok", 3]), 400, "invalid_type"),
        (job_body(segments=[None]), 400, "invalid_type"),
        (job_body(segments=[LONG]), 400, "segment_too_long"),
        (job_body(segments=["a\x00b"]), 400, "invalid_text"),
        (job_body(segments=["\ud800"]), 400, "invalid_text"),
        (job_body(priority=10), 400, "invalid_priority"),
        (job_body(priority=-1), 400, "invalid_priority"),
        (job_body(priority=True), 400, "invalid_priority"),
        (job_body(priority="high"), 400, "invalid_priority"),
        (job_body(min_score=1.5), 400, "invalid_min_score"),
        (job_body(min_score=-0.1), 400, "invalid_min_score"),
        (job_body(min_score=True), 400, "invalid_min_score"),
        (job_body(below_min_score="drop"), 400, "invalid_below_min_score"),
        (job_body(metadata=[1, 2]), 400, "invalid_type"),
        (job_body(metadata={"k": "v" * 5000}), 400, "metadata_too_large"),
        (job_body(callback_url="ftp://example.com/x"), 400, "invalid_callback_url"),
        (job_body(callback_url="https://user:pw@example.com/x"), 400, "invalid_callback_url"),
        (job_body(callback_url=5), 400, "invalid_callback_url"),
        (job_body(colour="blue"), 400, "unknown_field"),
        ({"source_lang": "en", "target_lang": "de"}, 400, "missing_field"),
        ({"source_lang": "en", "segments": ["x"]}, 400, "missing_field"),
        ({"source_lang": 5, "target_lang": "de", "segments": ["x"]}, 400, "invalid_type"),
        (job_body(documents=[{"segments": ["x"]}]), 400, "invalid_request"),
        ({"source_lang": "en", "target_lang": "de", "documents": []}, 400, "invalid_type"),
        ({"source_lang": "en", "target_lang": "de", "documents": ["x"]}, 400, "invalid_type"),
        (
            {"source_lang": "en", "target_lang": "de", "documents": [{"id": "a"}]},
            400,
            "missing_field",
        ),
        (
            {"source_lang": "en", "target_lang": "de", "documents": [{"id": 7, "segments": []}]},
            400,
            "invalid_type",
        ),
        (
            {
                "source_lang": "en",
                "target_lang": "de",
                "documents": [{"segments": ["x"], "extra": 1}],
            },
            400,
            "unknown_field",
        ),
        ([1, 2, 3], 400, "invalid_json"),
        ("just a string", 400, "invalid_json"),
    ],
)
def test_bad_json_bodies_are_rejected(app, client, auth, body, status, code):
    response = client.post("/v1/jobs", json=body, headers=auth)
    assert response.status_code == status, response.get_json()
    assert response.get_json()["error"]["code"] == code
    assert response.get_json()["error"]["message"]
    assert job_count(app) == 0


def test_unknown_pair_lists_available_pairs(client, auth):
    response = client.post("/v1/jobs", json=job_body(target_lang="fr"), headers=auth)
    assert "en-de" in response.get_json()["error"]["message"]
    assert "de-en" in response.get_json()["error"]["message"]


def test_malformed_json_is_400(client, auth):
    response = client.post(
        "/v1/jobs", data="{not json", headers=auth, content_type="application/json"
    )
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_json"


def test_wrong_content_type_is_400(client, auth):
    response = client.post("/v1/jobs", data="hello", headers=auth, content_type="text/plain")
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "unsupported_media_type"


def test_too_many_segments_is_413(app, client, auth):
    app.extensions["stapel"].settings = app.extensions["stapel"].settings.replace(
        max_segments_per_job=5
    )
    response = client.post("/v1/jobs", json=job_body(segments=["a"] * 6), headers=auth)
    assert response.status_code == 413
    assert response.get_json()["error"]["code"] == "too_many_segments"
    docs = {
        "source_lang": "en",
        "target_lang": "de",
        "documents": [{"segments": ["a"] * 3}, {"segments": ["b"] * 3}],
    }
    assert client.post("/v1/jobs", json=docs, headers=auth).status_code == 413
    assert job_count(app) == 0


def test_body_over_size_limit_is_413(app, client, auth):
    app.config["MAX_CONTENT_LENGTH"] = 1000
    response = client.post("/v1/jobs", json=job_body(segments=["y" * 600, "z" * 600]), headers=auth)
    assert response.status_code == 413
    assert response.get_json()["error"]["code"] == "request_entity_too_large"
    assert job_count(app) == 0


@pytest.mark.parametrize(
    ("files", "form", "code"),
    [
        ([("notes.md", b"hello\n")], {}, "unsupported_file_type"),
        ([("latin1.txt", "Gr\xfc\xdfe\n".encode("latin-1"))], {}, "invalid_encoding"),
        ([], {}, "no_segments"),
        ([("empty.txt", b"")], {}, "no_segments"),
        ([("a.txt", b"hi\n")], {"metadata": "{broken"}, "invalid_json"),
        ([("a.txt", b"hi\n")], {"colour": "red"}, "unknown_field"),
        ([("a.txt", b"hi\n")], {"priority": "11"}, "invalid_priority"),
        ([("a.txt", b"hi\n")], {"min_score": "high"}, "invalid_min_score"),
        ([("a.txt", b"hi\n")], {"min_score": "2"}, "invalid_min_score"),
        ([("a.txt", b"hi\n")], {"below_min_score": "none"}, "invalid_below_min_score"),
    ],
)
def test_bad_uploads_are_rejected(app, client, auth, files, form, code):
    data = {"source_lang": "en", "target_lang": "de", **form}
    data["files"] = [(io.BytesIO(content), name) for name, content in files]
    response = client.post("/v1/jobs", data=data, headers=auth, content_type="multipart/form-data")
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["error"]["code"] == code
    assert job_count(app) == 0


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("status=done", "invalid_status"),
        ("limit=0", "invalid_limit"),
        ("limit=abc", "invalid_limit"),
        ("limit=1000", "invalid_limit"),
        ("cursor=%%%", "invalid_cursor"),
    ],
)
def test_bad_list_queries(client, auth, query, code):
    response = client.get(f"/v1/jobs?{query}", headers=auth)
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == code


def test_unknown_route_and_method_are_json(client, auth):
    assert client.get("/v1/nothing", headers=auth).get_json()["error"]["code"] == "not_found"
    response = client.delete("/v1/jobs", headers=auth)
    assert response.status_code == 405
    assert json.loads(response.data)["error"]["code"] == "method_not_allowed"


def test_bad_idempotency_key(client, auth):
    headers = {**auth, "Idempotency-Key": "k" * 201}
    response = client.post("/v1/jobs", json=job_body(), headers=headers)
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_idempotency_key"
