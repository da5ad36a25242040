"""A document's reading never takes the web's threads from other tenants.

Each web process reads at most STAPEL_PARSE_SLOTS documents at once, and at most
STAPEL_PARSE_SLOTS_PER_TENANT of one tenant; a request that finds none free is answered
at once (429 for the tenant's share, 503 for the process's) and reads still answer.
"""

from __future__ import annotations

import io

import pytest

from app.parse_slots import FREE_BELOW_BYTES, ParseSlots
from stapel.exceptions import TooManyParses, Unavailable
from stapel.keys import get_or_create_tenant
from tests.security.conftest import key_for

BIG_HTML = b"<p>Hello world.</p>\n" * (FREE_BELOW_BYTES // 19 + 1)


def test_slots_bound_the_process_and_each_tenant():
    slots = ParseSlots(total=2, per_tenant=1)
    with slots.hold("a"):
        with pytest.raises(TooManyParses), slots.hold("a"):
            pass
        with slots.hold("b"), pytest.raises(Unavailable), slots.hold("c"):
            pass
        with slots.hold("c"):  # b's slot is free again
            pass
    assert not slots.held


def test_a_slot_is_given_back_when_reading_fails():
    slots = ParseSlots(total=1, per_tenant=1)
    with pytest.raises(ValueError), slots.hold("a"):
        raise ValueError("malformed")
    with slots.hold("a"):
        pass


def upload(client, headers, content: bytes, name: str = "a.html"):
    data = {"source_lang": "en", "target_lang": "de", "f": (io.BytesIO(content), name)}
    return client.post("/v1/jobs", data=data, headers=headers, content_type="multipart/form-data")


@pytest.fixture
def busy_app(make_app):
    return make_app(parse_slots=2, parse_slots_per_tenant=1, rate_submit="off")


def tenant_id(application, name: str) -> str:
    with application.extensions["stapel"].sessions() as s:
        return get_or_create_tenant(s, name).id


def test_a_tenant_holding_its_share_gets_429_and_others_still_upload(busy_app):
    client = busy_app.test_client()
    acme, globex = key_for(busy_app, "acme"), key_for(busy_app, "globex")
    slots = busy_app.extensions["stapel"].parse_slots
    with slots.hold(tenant_id(busy_app, "acme")):  # as a long upload of acme's would
        refused = upload(client, acme, BIG_HTML)
        assert refused.status_code == 429
        assert refused.get_json()["error"]["code"] == "too_many_parses"
        assert refused.headers["Retry-After"]
        assert upload(client, globex, BIG_HTML).status_code == 202
        assert upload(client, acme, b"<p>Small.</p>").status_code == 202  # no slot needed
    assert upload(client, acme, BIG_HTML).status_code == 202
    assert not slots.held


def test_a_process_with_every_slot_busy_answers_503_and_reads_answer(busy_app):
    client = busy_app.test_client()
    acme = key_for(busy_app, "acme")
    job = upload(client, acme, b"<p>Small.</p>").get_json()["id"]
    slots = busy_app.extensions["stapel"].parse_slots
    with slots.hold("x"), slots.hold("y"):
        refused = upload(client, acme, BIG_HTML)
        assert refused.status_code == 503
        assert refused.get_json()["error"]["code"] == "parsers_busy"
        assert refused.headers["Retry-After"]
        assert client.get(f"/v1/jobs/{job}", headers=acme).status_code == 200
