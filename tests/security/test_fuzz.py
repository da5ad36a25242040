"""Fuzzing: schemathesis drives every documented operation through the WSGI app.

Fixed seed (derandomized), a bounded number of cases per operation; no case may get a
5xx, a status the document does not list, or a body that breaks its schema.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    response_schema_conformance,
    status_code_conformance,
)

from app import create_app
from app.api.openapi import document
from stapel.keys import create_key

pytestmark = pytest.mark.slow


@pytest.fixture
def fuzz_app(engine, redis_client, settings_overrides):
    """The app with rate limits off (the fuzzer sends more than a client should)."""
    application = create_app({**settings_overrides, "rate_submit": "off", "rate_read": "off"})
    application.config["TESTING"] = True
    yield application
    application.extensions["stapel"].dispose()


@pytest.fixture
def fuzz_key(fuzz_app):
    with fuzz_app.extensions["stapel"].sessions() as s:
        return create_key(s, "fuzz")[1]


schema = schemathesis.openapi.from_dict(document())
"""The document the app serves at /v1/openapi.json (checked equal below)."""


def test_the_fuzzed_document_is_the_served_one(client):
    assert client.get("/v1/openapi.json").get_json() == document()


@schema.parametrize()
@settings(max_examples=25, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_case_breaks_the_api_or_its_document(case, fuzz_app, fuzz_key):
    case.operation.schema.app = fuzz_app  # WSGI: requests go straight into the app
    case.call_and_validate(
        app=fuzz_app,
        headers={"Authorization": f"Bearer {fuzz_key}"},
        checks=[not_a_server_error, status_code_conformance, response_schema_conformance],
    )
