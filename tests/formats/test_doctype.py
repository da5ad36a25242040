"""A DOCTYPE is judged by an XML parser over the whole prolog, not by a scan of a prefix.

Refused wherever it stands: entity or DTD declarations (an internal subset) and an
external DTD. Accepted: a bare `<!DOCTYPE name>`, and anything inside a comment. What
is accepted comes back well-formed.
"""

from __future__ import annotations

import io

import pytest
from lxml import etree

from stapel.exceptions import ValidationError
from stapel.formats import Limits, parse_document, render_document
from stapel.formats.base import FormatError
from stapel.formats.fragments import Markup, parse

HEAD = b'<?xml version="1.0" encoding="UTF-8"?>\n'
BODY = (
    b'<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
    b'<file source-language="en" datatype="plaintext" original="x"><body>'
    b'<trans-unit id="1"><source>Hello %s.</source></trans-unit>'
    b"</body></file></xliff>\n"
)
LONG_COMMENT = b"<!--" + b"x" * 70_000 + b"-->\n"
ENTITIES = b'<!DOCTYPE xliff [<!ENTITY d "dog">]>\n'


def xliff(prolog: bytes, word: bytes = b"world") -> bytes:
    return HEAD + prolog + BODY.replace(b"%s", word)


REFUSED = [
    (xliff(LONG_COMMENT + ENTITIES, b"&d;"), "line 3, column 1"),
    (xliff(b"<!-- a -->\n" + ENTITIES, b"&d;"), "line 3, column 1"),
    (xliff(b'<!DOCTYPE xliff SYSTEM "http://127.0.0.1:9/x.dtd">\n'), "external DTD"),
    (xliff(b'<!DOCTYPE xliff PUBLIC "-//X//Y" "y.dtd">\n'), "external DTD"),
    (xliff(b"<!DOCTYPE xliff>\n", b"&d;"), "Entity 'd' not defined"),
]


@pytest.mark.parametrize(("data", "says"), REFUSED)
def test_declarations_are_refused_wherever_they_stand(data, says):
    with pytest.raises(ValidationError) as raised:
        parse_document("a.xlf", data, Limits())
    assert says in raised.value.message


def test_a_long_comment_before_entities_is_refused_through_the_api(client, auth):
    data = {"source_lang": "en", "target_lang": "de"}
    data["f"] = (io.BytesIO(xliff(LONG_COMMENT + ENTITIES, b"&d;")), "a.xlf")
    response = client.post("/v1/jobs", data=data, headers=auth, content_type="multipart/form-data")
    assert response.status_code == 400
    assert "DOCTYPE" in response.get_json()["error"]["message"]


ACCEPTED = [
    (b"<!DOCTYPE xliff>\n", "<!DOCTYPE xliff>"),
    (b'<!-- <!DOCTYPE xliff [<!ENTITY d "dog">]> -->\n', ""),
    (LONG_COMMENT + b"<!DOCTYPE xliff>\n", "<!DOCTYPE xliff>"),
]


@pytest.mark.parametrize(("prolog", "doctype"), ACCEPTED)
def test_a_harmless_doctype_is_accepted_and_comes_back_well_formed(prolog, doctype):
    data = xliff(prolog)
    parsed = parse_document("a.xlf", data, Limits())
    assert parsed.segments == ["Hello world."]
    out = render_document("xliff", data, ["Hallo Welt."], parsed.options, ("en", "de"))
    tree = etree.fromstring(out, etree.XMLParser(resolve_entities=False, load_dtd=False))
    assert b"Hallo Welt." in out
    assert tree.getroottree().docinfo.doctype == doctype


DEEPL_TEXTS = [
    "<!DOCTYPE html>\n<html>\n<body>\n<h1>My First Heading</h1>\n<p>My first paragraph.</p>\n"
    "</body>\n</html>",
    "<!-- <!DOCTYPE html> --><p>Hello <b>world</b>.</p>",
]


@pytest.mark.parametrize("text", DEEPL_TEXTS)
def test_deepl_xml_text_with_a_doctype_or_a_comment_holding_one_is_read(text):
    fragment = parse(text, Markup("xml"))
    assert fragment.segments
    assert fragment.rebuild(fragment.segments) == text


@pytest.mark.parametrize(
    "text", ['<!DOCTYPE html [<!ENTITY d "x">]><p>&d;</p>', '<!DOCTYPE html SYSTEM "x"><p/>']
)
def test_deepl_xml_text_with_declarations_is_refused(text):
    with pytest.raises(FormatError, match="DOCTYPE"):
        parse(text, Markup("xml"))
