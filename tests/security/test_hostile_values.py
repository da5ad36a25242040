"""Hostile values are 4xx with a message, never a 500: text PostgreSQL cannot store,
charsets that are not text encodings, URLs the callback sender cannot send to, ids and
query values that only look like numbers or ids.

Run on PostgreSQL too (DATABASE_URL): a NUL there is a DataError, not a stored row.
"""

from __future__ import annotations

import base64
import io

import pytest

from tests.factories import job_body


def upload(client, auth, name: str, content: bytes, **form):
    data = {"source_lang": "en", "target_lang": "de", **form}
    data["files"] = [(io.BytesIO(content), name)]
    return client.post("/v1/jobs", data=data, headers=auth, content_type="multipart/form-data")


PO_HEAD = b'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=%s\\n"\n\n'

UNSTORABLE = [
    ("app.po", b'msgid "a\x00b"\nmsgstr ""\n', "NUL"),
    ("subs.srt", b"1\n00:00:01,000 --> 00:00:02,000\nHi\x00 there\n", "NUL"),
    ("page.html", b"<p>Hello\x00 world</p>", "NUL"),
    ("page.html", b'<p><img alt="a\x00b"></p>', "NUL"),
    # unicode_escape would turn \ud800 into a lone surrogate; refused as a charset first.
    ("app.po", PO_HEAD % b"unicode_escape" + b'msgid "a\\\\ud800b"\nmsgstr ""\n', "charset"),
]


@pytest.mark.parametrize(("name", "content", "says"), UNSTORABLE)
def test_text_the_database_cannot_store_is_a_400(client, auth, name, content, says):
    response = upload(client, auth, name, content)
    assert response.status_code == 400, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] in ("invalid_text", "invalid_encoding")
    assert says in error["message"] and name in error["message"]


@pytest.mark.parametrize(
    "charset", [b"unicode_escape", b"raw_unicode_escape", b"punycode", b"idna", b"rot13", b"hex"]
)
def test_a_po_charset_that_is_no_text_encoding_is_refused(client, auth, charset):
    response = upload(client, auth, "app.po", PO_HEAD % charset + b'msgid "Hi"\nmsgstr ""\n')
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_encoding"
    assert "charset" in response.get_json()["error"]["message"]


@pytest.mark.parametrize("charset", [b"UTF-8", b"ISO-8859-1", b"cp1252", b"KOI8-R", b"CHARSET"])
def test_real_po_charsets_are_read(client, auth, charset):
    response = upload(client, auth, "app.po", PO_HEAD % charset + b'msgid "Hi"\nmsgstr ""\n')
    assert response.status_code == 202, response.get_json()


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1/",
        "http://[zz]/hook",
        "http://example.com/ok two",
        "http://example.com/tab\there",
        "http://example.com/\x7f",
        "http://exa mple.com/hook",
    ],
)
def test_a_callback_url_the_sender_cannot_send_is_refused_at_submit(client, auth, url):
    response = client.post("/v1/jobs", json=job_body(["Hello."], callback_url=url), headers=auth)
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["error"]["code"] == "invalid_callback_url"


def test_a_callback_url_with_an_escaped_space_is_accepted(client, auth):
    url = "https://example.com/ok%20two?x=1"
    response = client.post("/v1/jobs", json=job_body(["Hello."], callback_url=url), headers=auth)
    assert response.status_code == 202
    assert response.get_json()["callback_url"] == url


@pytest.fixture
def job_id(client, auth) -> str:
    response = client.post("/v1/jobs", json=job_body(["Hello."]), headers=auth)
    assert response.status_code == 202
    return response.get_json()["id"]


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "-1", "1e3", " 1", "99999999999999999999"])
def test_a_document_index_is_ascii_digits(client, auth, job_id, value):
    response = client.get(
        f"/v1/jobs/{job_id}/result",
        query_string={"format": "file", "document": value},
        headers=auth,
    )
    assert 400 <= response.status_code < 500, response.status_code


@pytest.mark.parametrize(
    "path",
    [
        "/v1/jobs/%00",
        "/v1/jobs/%00/result",
        "/v1/jobs/%00/documents",
        "/v1/memories/%00",
        "/v1/memories/%00/tmx",
        "/v1/memories/%ED%A0%80",
        "/v1/jobs/" + "a" * 100,
    ],
)
def test_an_id_that_cannot_exist_is_a_404(client, auth, path):
    response = client.get(path, headers=auth)
    assert response.status_code == 404
    assert response.get_json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("path", ["/v1/jobs/%00/cancel"])
def test_an_id_that_cannot_exist_is_a_404_on_post(client, auth, path):
    assert client.post(path, headers=auth).status_code == 404


def test_a_cursor_naming_an_id_that_cannot_exist_is_a_400(client, auth):
    cursor = base64.urlsafe_b64encode(b"2026-01-01T00:00:00+00:00|\x00").decode()
    response = client.get("/v1/jobs", query_string={"cursor": cursor}, headers=auth)
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_cursor"


def test_a_priority_that_only_looks_like_a_number_is_a_400(client, auth):
    response = upload(client, auth, "a.txt", b"Hello.\n", priority="\u00b2")
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_priority"


def test_libretranslate_alternatives_that_only_look_like_a_number_are_a_400(client, api_key):
    body = {"q": "Hello.", "source": "en", "target": "de", "alternatives": "\u00b2"}
    response = client.post("/libretranslate/translate", json={**body, "api_key": api_key})
    assert response.status_code == 400


def test_a_libretranslate_download_with_a_nul_is_a_404(client):
    assert client.get("/libretranslate/download_file/%00.k.a.txt").status_code == 404


@pytest.mark.parametrize("key", ["\u00fc" * 64, "\x00", ""])
def test_a_deepl_document_key_that_cannot_match_is_a_404(client, api_key, key):
    auth = {"Authorization": f"DeepL-Auth-Key {api_key}"}
    data = {"file": (io.BytesIO(b"Hello world.\n"), "a.txt"), "target_lang": "DE"}
    created = client.post("/deepl/v2/document", data=data, headers=auth)
    assert created.status_code == 200, created.get_json()
    document_id = created.get_json()["document_id"]
    response = client.post(
        f"/deepl/v2/document/{document_id}", json={"document_key": key}, headers=auth
    )
    assert response.status_code in (400, 404), response.get_data()
