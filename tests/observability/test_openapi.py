"""The OpenAPI document matches the app's routes; /docs renders it with nothing external."""

from __future__ import annotations

import re

from app.api.openapi import ERROR_CODES

IGNORED = {"HEAD", "OPTIONS"}


def routes(app) -> set[tuple[str, str]]:
    return {
        (re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule), method.lower())
        for rule in app.url_map.iter_rules()
        if rule.endpoint != "static"
        for method in rule.methods - IGNORED
    }


def test_document_lists_exactly_the_routes_of_the_app(app, client):
    response = client.get("/v1/openapi.json")
    assert response.status_code == 200, "the document needs no key"
    doc = response.get_json()
    assert doc["openapi"].startswith("3.")
    documented = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    assert documented == routes(app)


def test_every_documented_error_is_in_the_api_reference_table(client):
    doc = client.get("/v1/openapi.json").get_json()
    table = open("docs/api.md", encoding="utf-8").read()
    for status, codes in ERROR_CODES.items():
        for code in codes:
            assert f"`{code}`" in table, f"{code} ({status}) missing from docs/api.md"
    create = doc["paths"]["/v1/jobs"]["post"]["responses"]
    assert {"202", "200", "400", "401", "413", "503"} <= create.keys()
    assert (
        "job_finished"
        in doc["paths"]["/v1/jobs/{job_id}/cancel"]["post"]["responses"]["409"]["description"]
    )
    assert doc["paths"]["/v1/openapi.json"]["get"]["security"] == []


def test_docs_page_is_self_contained_and_names_every_path(client):
    response = client.get("/docs")
    assert response.status_code == 200 and response.mimetype == "text/html"
    page = response.get_data(as_text=True)
    assert not re.search(r"""(src|href)=['"]?(https?:)?//""", page), "no external resources"
    for path in client.get("/v1/openapi.json").get_json()["paths"]:
        assert path in page
