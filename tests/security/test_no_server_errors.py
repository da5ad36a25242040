"""Property: no input makes a 5xx. Each format's parser gets fuzzed documents and every
route's ids and query values fuzzed bytes; the answer is a result or a 4xx, and a
document's segments are text the database can store.
"""

from __future__ import annotations

import io
from urllib.parse import quote_from_bytes

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stapel.exceptions import TooLarge, ValidationError
from stapel.formats import Limits, parse_document
from stapel.storable import unstorable
from tests.formats.samples import docx, run

FUZZ = settings(
    max_examples=60, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck)
)
ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=40) | st.sampled_from(
    ["\x00", "&#0;", "&#xD800;", "\\0", "\\ud800", "<", "]]>", "<!--", '"', "%s", "{0}", "\r"]
)
CHARSETS = st.sampled_from(
    ["UTF-8", "latin-1", "unicode_escape", "punycode", "utf-7", "utf-16", "x", "", "CHARSET"]
)


def _doc(name: str, data: bytes) -> None:
    try:
        parsed = parse_document(name, data, Limits(max_segments=1000))
    except (ValidationError, TooLarge):
        return
    for segment in parsed.segments:
        assert unstorable(segment) is None


@FUZZ
@given(st.lists(ANY_TEXT, max_size=4), CHARSETS)
def test_po_parser(texts, charset):
    head = f'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset={charset}\\n"\n\n'
    body = "".join(f'msgid "{t}"\nmsgstr ""\n\n' for t in texts)
    _doc("a.po", (head + body).encode("utf-8", "surrogatepass"))


@FUZZ
@given(st.lists(ANY_TEXT, max_size=4))
def test_srt_parser(texts):
    body = "".join(f"{i}\n00:00:0{i},000 --> 00:00:0{i},500\n{t}\n\n" for i, t in enumerate(texts))
    _doc("a.srt", body.encode("utf-8", "surrogatepass"))


@FUZZ
@given(st.lists(ANY_TEXT, max_size=4), st.sampled_from(["p", "b", "img", "br", "script", "x"]))
def test_html_parser(texts, tag):
    body = "".join(f'<p><{tag} alt="{t}">{t}</{tag}></p>' for t in texts)
    _doc("a.html", body.encode("utf-8", "surrogatepass"))


@FUZZ
@given(st.lists(ANY_TEXT, max_size=4), st.sampled_from(["", "<!DOCTYPE xliff>", "<!--x-->"]))
def test_xliff_parser(texts, prolog):
    units = "".join(
        f'<trans-unit id="{i}"><source>{t}</source></trans-unit>' for i, t in enumerate(texts)
    )
    body = (
        f'<?xml version="1.0"?>{prolog}<xliff version="1.2" '
        f'xmlns="urn:oasis:names:tc:xliff:document:1.2"><file><body>{units}</body></file></xliff>'
    )
    _doc("a.xlf", body.encode("utf-8", "surrogatepass"))


@FUZZ
@given(st.lists(ANY_TEXT, max_size=3))
def test_docx_parser(texts):
    try:
        data = docx([run(t) for t in texts])
    except UnicodeEncodeError:
        return
    _doc("a.docx", data)


@FUZZ
@given(st.binary(max_size=300), st.sampled_from(["a.po", "a.srt", "a.html", "a.xlf", "a.docx"]))
def test_any_bytes(data, name):
    _doc(name, data)


ROUTES = [
    ("get", "/v1/jobs/{}"),
    ("get", "/v1/jobs/{}/result"),
    ("get", "/v1/jobs/{}/documents"),
    ("post", "/v1/jobs/{}/cancel"),
    ("get", "/v1/memories/{}"),
    ("get", "/v1/memories/{}/tmx"),
    ("delete", "/v1/memories/{}"),
    ("get", "/libretranslate/download_file/{}.k.a.txt"),
]
QUERIES = [
    "/v1/jobs?status={}",
    "/v1/jobs?limit={}",
    "/v1/jobs?cursor={}",
    "/v1/jobs/{job}/result?format={}",
    "/v1/jobs/{job}/result?format=file&document={}",
]
HOSTILE = st.binary(max_size=24) | st.sampled_from(
    [b"\x00", b"\xed\xa0\x80", "\u00b2".encode(), b"-1", b"1e9", b"9" * 30, b"%00", b"..", b"/"]
)


@pytest.mark.parametrize(("method", "route"), ROUTES)
def test_fuzzed_ids_are_never_a_5xx(client, auth, method, route):
    @FUZZ
    @given(HOSTILE)
    def check(raw):
        response = getattr(client, method)(
            route.format(quote_from_bytes(raw, safe="")), headers=auth
        )
        assert response.status_code < 500, (raw, response.get_data())

    check()


@pytest.mark.parametrize("query", QUERIES)
def test_fuzzed_query_values_are_never_a_5xx(client, auth, query):
    job = client.post(
        "/v1/jobs",
        data={"source_lang": "en", "target_lang": "de", "f": (io.BytesIO(b"<p>Hi</p>"), "a.html")},
        headers=auth,
        content_type="multipart/form-data",
    ).get_json()["id"]

    @FUZZ
    @given(HOSTILE)
    def check(raw):
        path = query.replace("{job}", job).format(quote_from_bytes(raw, safe=""))
        response = client.get(path, headers=auth)
        assert response.status_code < 500, (raw, response.get_data())

    check()


@FUZZ
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "priority": st.text(max_size=5),
            "callback_url": st.text(max_size=30).map(lambda t: "http://" + t),
            "memories": st.text(max_size=40),
            "split_sentences": st.text(max_size=5),
            "cache": st.text(max_size=5),
            "mark_fuzzy": st.text(max_size=5),
            "metadata": st.text(max_size=20),
        },
    )
)
def test_fuzzed_form_fields_are_never_a_5xx(app, api_key, fields):
    client = app.test_client()
    data = {"source_lang": "en", "target_lang": "de", **fields}
    data["f"] = (io.BytesIO(b"Hello.\n"), "a.txt")
    try:
        response = client.post(
            "/v1/jobs",
            data=data,
            headers={"Authorization": f"Bearer {api_key}"},
            content_type="multipart/form-data",
        )
    except UnicodeEncodeError:  # a lone surrogate cannot even be sent
        return
    assert response.status_code < 500, (fields, response.get_data())
