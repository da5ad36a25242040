"""Bad requests, per dialect: the exact status and the error shape its clients read.

LibreTranslate's clients read `{"error": message}`, DeepL's `{"message": message}` (the
official client puts it in its exception); Weblate disables an engine for 30 minutes on
429, 401, 403 and 503, so those mean exactly a rate limit or quota, a bad key, and an
unreachable store. No worker runs here: what needs one times out (504).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import pytest
from sqlalchemy import select

from app import create_app
from stapel.keys import create_key
from stapel.tables import Job

LONG = "x" * 4001


@dataclass(frozen=True)
class Case:
    """One bad request: what is sent, and the status and message part expected."""

    dialect: str
    path: str
    status: int
    needle: str
    json: dict | None = None
    data: dict | None = None
    method: str = "POST"
    key: str = "valid"
    """valid | none | bad | bearer (DeepL: the /v1 scheme instead of DeepL-Auth-Key)."""
    overrides: dict = field(default_factory=dict)
    repeat: int = 1
    """Send it this many times; the last answer counts (rate limits)."""


def lt(path, status, needle, **kw) -> Case:
    return Case("libretranslate", "/libretranslate" + path, status, needle, **kw)


def dl(path, status, needle, **kw) -> Case:
    return Case("deepl", "/deepl/v2" + path, status, needle, **kw)


def upload(name: str, content: bytes = b"Hello world.\n", **fields) -> dict:
    return {"file": (io.BytesIO(content), name), **fields}


Q = {"q": "Hello world.", "source": "en", "target": "de"}
T = {"text": ["Hello world."], "target_lang": "DE"}
G = {"name": "g", "source_lang": "en", "target_lang": "de", "entries": "Hello\tHallo"}
CASES = [
    lt("/translate", 403, "API key is required", json=Q, key="none"),
    lt("/translate", 403, "invalid or revoked API key", json=Q, key="bad"),
    lt("/detect", 403, "API key is required", json={"q": "Hallo"}, key="none"),
    lt("/translate", 400, "Invalid request: missing q parameter", json={**Q, "q": ""}),
    lt(
        "/translate",
        400,
        "Invalid request: missing source parameter",
        json={"q": "a", "target": "de"},
    ),
    lt(
        "/translate",
        400,
        "Invalid request: missing target parameter",
        data={"q": "a", "source": "en"},
    ),
    lt("/translate", 400, "xx is not supported", json={**Q, "target": "xx"}),
    lt("/translate", 400, "fr is not supported", json={**Q, "source": "fr"}),
    lt("/translate", 400, "no model for en-en", json={**Q, "target": "en"}),
    lt(
        "/translate",
        400,
        "text 1 is not well-formed HTML at line 1, column 1: <b> is never closed",
        json={**Q, "q": ["<p>fine</p>", "<b>Hello"], "format": "html"},
    ),
    lt(
        "/translate",
        400,
        "text 0 is not well-formed HTML at line 1, column 10: </i> closes nothing",
        json={**Q, "q": "<p>Hello </i></p>", "format": "html"},
    ),
    lt(
        "/translate",
        400,
        "the texts hold 41 characters with their tags; the limit is 40",
        json={**Q, "q": ["<p>" + "a" * 34 + "</p>"], "format": "html"},
        overrides={"interactive_max_items": 2, "max_segment_chars": 20},
    ),
    lt(
        "/translate",
        400,
        "reserved for Stapel's tag markers",
        json={**Q, "q": "a \ufdd01\ufdd3 b", "format": "html"},
    ),
    lt("/translate", 400, "format must be text or html", json={**Q, "format": "pdf"}),
    lt("/translate", 400, "q must be a string or a list of strings", json={**Q, "q": ["a", 3]}),
    lt("/translate", 400, "51 texts in one request; the limit is 50", json={**Q, "q": ["a"] * 51}),
    lt("/translate", 400, "has 4001 characters; the limit is 4000", json={**Q, "q": [LONG]}),
    lt("/translate", 400, "contains a NUL character", json={**Q, "q": "a\x00b"}),
    lt("/translate", 400, "alternatives must be a whole number", json={**Q, "alternatives": "x"}),
    lt("/translate", 400, "the body is not a JSON object", json=None, data=None, method="JSON["),
    lt("/translate", 400, "the body is not a JSON object", method="JSON" + "[" * 100_000),
    lt("/detect", 400, "Invalid request: missing q parameter", json={}),
    lt("/suggest", 403, "Suggestions are disabled on this server.", json={}, key="none"),
    lt("/download_file/nothing-here", 404, "no such file", method="GET", key="none"),
    lt("/download_file/a.b.c.txt", 404, "no document with id 'a'", method="GET", key="none"),
    lt(
        "/translate_file",
        400,
        "Invalid request: missing file parameter",
        data={"source": "en", "target": "de"},
    ),
    lt(
        "/translate_file",
        400,
        "unknown format; accepted",
        data=upload("a.pdf", source="en", target="de"),
    ),
    lt(
        "/translate",
        429,
        "rate limit of 1 per 1 minute",
        json=Q,
        overrides={"rate_submit": "1/minute"},
        repeat=2,
    ),
    lt(
        "/translate",
        429,
        "characters per day would be passed",
        json=Q,
        overrides={"quota_characters_per_day": 5},
    ),
    lt(
        "/translate",
        429,
        "segments per day would be passed",
        json=Q,
        overrides={"quota_segments_per_day": 1},
        repeat=2,
    ),
    lt(
        "/translate",
        504,
        "did not finish within 0.3 s",
        json=Q,
        overrides={"interactive_timeout_s": 0.3},
    ),
    lt(
        "/translate",
        413,
        "exceeds the capacity limit",
        json={**Q, "q": "x" * 300},
        overrides={"max_body_bytes": 200},
    ),
    dl("/translate", 403, "DeepL-Auth-Key", json=T, key="none"),
    dl("/translate", 403, "DeepL-Auth-Key", json=T, key="bearer"),
    dl("/usage", 403, "invalid or revoked API key", method="GET", key="bad"),
    dl("/translate", 400, "Parameter 'text' not specified.", json={"target_lang": "DE"}),
    dl("/translate", 400, "Parameter 'text' not specified.", data={"target_lang": "DE"}),
    dl("/translate", 400, "Parameter 'target_lang' not specified.", json={"text": ["a"]}),
    dl("/translate", 400, "Parameter 'text' must hold strings.", json={**T, "text": [1]}),
    dl(
        "/translate", 400, "Value for 'target_lang' not supported.", json={**T, "target_lang": "FR"}
    ),
    dl(
        "/translate", 400, "Value for 'source_lang' not supported.", json={**T, "source_lang": "FR"}
    ),
    dl(
        "/translate",
        400,
        "at line 1, column 19: malformed XML: </i> does not close <b>, which is still open",
        json={**T, "text": ["Hello <b>world</i>."], "tag_handling": "xml"},
    ),
    dl(
        "/translate",
        400,
        "text 0 is not well-formed XML at line 1, column 11: malformed XML: </b> closes nothing",
        data={**T, "text": "Hello </b>", "tag_handling": "xml"},
    ),
    dl(
        "/translate",
        400,
        "text 0 is not well-formed HTML at line 1, column 1: <a> is never closed",
        json={**T, "text": ["<a href='x'>Hello"], "tag_handling": "html"},
    ),
    dl(
        "/translate",
        400,
        "'splitting_tags' is supported with tag_handling=xml only",
        json={**T, "tag_handling": "html", "splitting_tags": ["p"]},
    ),
    dl(
        "/translate",
        413,
        "the texts hold 41 characters with their tags; the limit is 40",
        json={**T, "text": ["<p>" + "a" * 34 + "</p>"], "tag_handling": "xml"},
        overrides={"interactive_max_items": 2, "max_segment_chars": 20},
    ),
    dl(
        "/translate",
        400,
        "Value for 'outline_detection' not supported.",
        json={**T, "tag_handling": "xml", "outline_detection": "maybe"},
    ),
    dl(
        "/translate",
        400,
        "Parameter 'ignore_tags' must hold tag names.",
        json={**T, "tag_handling": "xml", "ignore_tags": [1]},
    ),
    dl(
        "/translate",
        400,
        "Value for 'tag_handling' not supported.",
        json={**T, "tag_handling": "md"},
    ),
    dl(
        "/translate",
        400,
        "Value for 'tag_handling_version' not supported.",
        json={**T, "tag_handling": "xml", "tag_handling_version": "v3"},
    ),
    dl("/translate", 400, "'formality' is not supported", json={**T, "formality": "more"}),
    dl(
        "/translate",
        400,
        "Value for 'split_sentences' not supported.",
        json={**T, "split_sentences": "2"},
    ),
    dl(
        "/translate",
        400,
        "Use of a glossary requires the 'source_lang' parameter",
        json={**T, "glossary_id": "g1"},
    ),
    dl(
        "/translate",
        404,
        "Glossary not found",
        json={**T, "source_lang": "EN", "glossary_id": "g1"},
    ),
    dl(
        "/document",
        400,
        "glossary_id applies to /v2/translate only",
        data=upload("a.txt", target_lang="DE", glossary_id="g1"),
    ),
    dl("/glossaries", 400, "Parameter 'name' not specified.", json={**G, "name": ""}),
    dl("/glossaries", 400, "Parameter 'entries' not specified.", data={**G, "entries": ""}),
    dl(
        "/glossaries",
        400,
        "Unsupported glossary source and target language pair",
        json={**G, "source_lang": "fr"},
    ),
    dl(
        "/glossaries", 400, "entry 2 has no tab between its terms", json={**G, "entries": "a\tb\nc"}
    ),
    dl(
        "/glossaries",
        400,
        "entry 2 gives the source term 'a' again",
        json={**G, "entries": "a,b\na,c", "entries_format": "csv"},
    ),
    dl(
        "/glossaries",
        400,
        "Value for 'entries_format' not supported.",
        json={**G, "entries_format": "xlsx"},
    ),
    dl(
        "/glossaries",
        413,
        "the glossary has 2 entries; the limit is 1",
        json={**G, "entries": "a\tb\nc\td"},
        overrides={"glossary_max_entries": 1},
    ),
    dl("/glossaries/g1", 404, "Glossary not found", method="GET"),
    dl("/glossaries/g1/entries", 404, "Glossary not found", method="GET"),
    dl("/glossaries/g1", 404, "Glossary not found", method="DELETE"),
    dl(
        "/translate",
        413,
        "51 texts in one request; the limit is 50",
        json={**T, "text": ["a"] * 51},
    ),
    dl("/translate", 400, "has 4001 characters; the limit is 4000", json={**T, "text": [LONG]}),
    dl(
        "/translate",
        413,
        "exceeds the capacity limit",
        json={**T, "text": ["x" * 300]},
        overrides={"max_body_bytes": 200},
    ),
    dl(
        "/translate",
        456,
        "characters per day would be passed",
        json=T,
        overrides={"quota_characters_per_day": 5},
    ),
    dl(
        "/translate",
        456,
        "segments per day would be passed",
        json=T,
        overrides={"quota_segments_per_day": 1},
        repeat=2,
    ),
    dl(
        "/translate",
        429,
        "rate limit of 1 per 1 minute",
        json=T,
        overrides={"rate_submit": "1/minute"},
        repeat=2,
    ),
    dl(
        "/translate",
        504,
        "did not finish within 0.3 s",
        json=T,
        overrides={"interactive_timeout_s": 0.3},
    ),
    dl("/languages", 400, "Value for 'type' not supported.", method="GET", data={"type": "both"}),
    dl("/document", 400, "Parameter 'file' not specified.", data={"target_lang": "DE"}),
    dl("/document", 400, "unknown format; accepted", data=upload("a.pdf", target_lang="DE")),
    dl(
        "/document",
        400,
        "output_format must be the input's format",
        data=upload("a.txt", target_lang="DE", output_format="docx"),
    ),
    dl(
        "/document/00000000-0000-0000-0000-000000000000",
        404,
        "no document with id",
        json={"document_key": "k"},
    ),
    dl(
        "/document/00000000-0000-0000-0000-000000000000",
        400,
        "Parameter 'document_key' not specified.",
        json={},
    ),
]


def case_id(case: Case) -> str:
    return f"{case.dialect}-{case.path.rsplit('/', 1)[-1]}-{case.status}-{case.needle[:24]}"


@pytest.fixture
def make_client(engine, redis_client, settings_overrides):
    apps = []

    def make(overrides: dict):
        # No worker runs: a request that reaches the lane waits 0.3 s, then answers 504.
        application = create_app({**settings_overrides, "interactive_timeout_s": 0.3, **overrides})
        application.config["TESTING"] = True
        apps.append(application)
        with application.extensions["stapel"].sessions() as s:
            key = create_key(s, "acme")[1]
        return application, application.test_client(), key

    yield make
    for application in apps:
        application.extensions["stapel"].dispose()


def send(client, case: Case, key: str):
    plain = {"valid": key, "bad": "stp_not-a-key", "none": None, "bearer": key}[case.key]
    headers, query, json, data = {}, {}, case.json, case.data
    if case.dialect == "deepl" and plain:
        scheme = "Bearer" if case.key == "bearer" else "DeepL-Auth-Key"
        headers["Authorization"] = f"{scheme} {plain}"
    elif plain:
        if json is not None:
            json = {**json, "api_key": plain}
        elif data is not None:
            data = {**data, "api_key": plain}
        else:
            query["api_key"] = plain
    if case.method.startswith("JSON"):  # a body that is not a JSON object
        body = case.method[4:]
        return client.post(
            case.path,
            data=body,
            headers=headers,
            query_string=query,
            content_type="application/json",
        )
    if data is not None:  # a fresh stream per send (uploads are read once)
        data = {
            k: (io.BytesIO(v[0].getvalue()), v[1]) if isinstance(v, tuple) else v
            for k, v in data.items()
        }
    return client.open(
        case.path, method=case.method, json=json, data=data, headers=headers, query_string=query
    )


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_bad_request_gets_the_dialects_status_and_shape(case, make_client):
    _app, client, key = make_client(case.overrides)
    for _ in range(case.repeat):
        response = send(client, case, key)
    body = response.get_json()
    field_name = "error" if case.dialect == "libretranslate" else "message"
    assert set(body) == {field_name} and isinstance(body[field_name], str), body
    assert response.status_code == case.status, body
    assert case.needle in body[field_name], body
    if case.status in (429, 456, 503):
        assert int(response.headers["Retry-After"]) >= 1


def test_a_timed_out_request_cancels_its_job(make_client):
    application, client, key = make_client({"interactive_timeout_s": 0.3})
    response = client.post("/libretranslate/translate", json={**Q, "api_key": key})
    assert response.status_code == 504
    with application.extensions["stapel"].sessions() as s:
        (job,) = s.scalars(select(Job)).all()
    assert job.status == "cancelled" and job.api == "libretranslate" and job.priority == 10


def test_jobs_in_flight_quota_is_429_not_456(make_client):
    _app, client, key = make_client({"quota_jobs_in_flight": 1})
    auth = {"Authorization": f"DeepL-Auth-Key {key}"}
    queued = client.post("/deepl/v2/document", data=upload("a.txt", target_lang="DE"), headers=auth)
    assert queued.status_code == 200  # a job in flight (no worker takes it)
    response = client.post("/deepl/v2/translate", json=T, headers=auth)
    assert response.status_code == 429 and int(response.headers["Retry-After"]) >= 1
    assert "jobs queued or running at once is used up" in response.get_json()["message"]


def test_document_result_before_it_is_done_is_503(make_client):
    _app, client, key = make_client({})
    auth = {"Authorization": f"DeepL-Auth-Key {key}"}
    created = client.post(
        "/deepl/v2/document", data=upload("a.txt", target_lang="DE"), headers=auth
    )
    assert created.status_code == 200, created.get_json()
    document = created.get_json()
    status = client.post(
        f"/deepl/v2/document/{document['document_id']}",
        json={"document_key": document["document_key"]},
        headers=auth,
    )
    assert status.get_json() == {"document_id": document["document_id"], "status": "queued"}
    result = client.post(
        f"/deepl/v2/document/{document['document_id']}/result",
        json={"document_key": document["document_key"]},
        headers=auth,
    )
    assert result.status_code == 503 and result.get_json() == {
        "message": "Document not ready: its translation is still running"
    }
    assert int(result.headers["Retry-After"]) >= 1
    other = client.post(
        f"/deepl/v2/document/{document['document_id']}",
        json={"document_key": "0" * 64},
        headers=auth,
    )
    assert other.status_code == 404


def test_a_glossary_of_another_pair_is_400(make_client):
    _app, client, key = make_client({})
    auth = {"Authorization": f"DeepL-Auth-Key {key}"}
    made = client.post("/deepl/v2/glossaries", json=G, headers=auth)
    assert made.status_code == 201, made.get_json()
    body = {"text": ["Hallo"], "source_lang": "DE", "target_lang": "EN-GB"}
    response = client.post(
        "/deepl/v2/translate",
        json={**body, "glossary_id": made.get_json()["glossary_id"]},
        headers=auth,
    )
    assert response.status_code == 400
    assert response.get_json() == {"message": "the glossary is for en-de, the request for de-en"}


def test_the_glossary_quota_is_456(make_client):
    _app, client, key = make_client({"glossary_quota": 1})
    auth = {"Authorization": f"DeepL-Auth-Key {key}"}
    assert client.post("/deepl/v2/glossaries", json=G, headers=auth).status_code == 201
    response = client.post("/deepl/v2/glossaries", data=G, headers=auth)
    assert response.status_code == 456
    assert "a tenant may hold 1 glossaries" in response.get_json()["message"]
