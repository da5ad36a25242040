"""Bad documents are refused with the file, line and column, and nothing is stored.

No DTD is read (billion laughs, external entities and network DTDs all fail before any
entity exists), zip containers are bounded before they unpack, and an unknown or
mismatched format names the accepted ones.
"""

from __future__ import annotations

import http.server
import io
import threading
import zipfile

import pytest
from sqlalchemy import func, select

from stapel.formats import Limits, parse_document
from stapel.formats.base import FormatError, Zip
from stapel.tables import DocumentFile, Job
from tests.formats.samples import XLIFF2, XLIFF12, docx, run

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file><body>
<trans-unit id="1"><source>&lol3;</source></trans-unit></body></file></xliff>
"""
XXE = b"""<?xml version="1.0"?>
<!DOCTYPE xliff [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file><body>
<trans-unit id="1"><source>&secret;</source></trans-unit></body></file></xliff>
"""
MALFORMED_XML = b"""<?xml version="1.0"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file><body>
  <trans-unit id="1"><source>The dog.</target></trans-unit>
</body></file></xliff>
"""

CASES = [
    # (file name, content, status, code, text the message must contain)
    ("bad.xlf", MALFORMED_XML, 400, "invalid_document", "'bad.xlf' (xliff) at line 3, column 47"),
    ("lol.xlf", BILLION_LAUGHS, 400, "invalid_document", "line 2, column 1: a DOCTYPE"),
    ("xxe.xlf", XXE, 400, "invalid_document", "line 2, column 1: a DOCTYPE"),
    ("page.html", b"<p>The <b>old man</p>\n", 400, "invalid_document", "line 1, column 18"),
    ("page.html", b"<div>\n  x </span>\n</div>", 400, "invalid_document", "line 2, column 5"),
    ("page.html", b"<p>The <b>old", 400, "invalid_document", "<b> is never closed"),
    ("page.html", b"<p>The <b", 400, "invalid_document", "line 1, column 8"),
    ("page.html", "<p>Gr\xfc\xdfe</p>".encode("latin-1"), 400, "invalid_encoding", "page.html"),
    (
        "subs.srt",
        b"1\n00:00:01,000 --> 00:00:02,000\nHi\n\n2\nHello\n",
        400,
        "invalid_document",
        "line 6, column 1",
    ),
    ("app.po", b'msgid "a"\nmsgstr "b"\nnonsense\n', 400, "invalid_document", "line 3"),
    ("app.po", b"/etc/passwd", 400, "invalid_document", "app.po"),  # content, never a path
    ("report.pdf", b"%PDF-1.4", 400, "unsupported_file_type", "accepted: .txt, .xlf"),
    ("doc.xlf", docx([run("Hello.")]), 400, "unsupported_file_type", "accepted:"),
    ("data.xlf", b"<?xml version='1.0'?><data/>", 400, "unsupported_file_type", "not <xliff>"),
    ("app.po", XLIFF12, 400, "unsupported_file_type", "accepted:"),
    ("doc.docx", b"PK\x03\x04broken", 400, "invalid_document", "not a valid zip"),
]


def upload(client, auth, files, **form):
    data = {"source_lang": "en", "target_lang": "de", **form}
    data["files"] = [(io.BytesIO(content), name) for name, content in files]
    return client.post("/v1/jobs", data=data, headers=auth, content_type="multipart/form-data")


def stored(app) -> int:
    with app.extensions["stapel"].sessions() as s:
        return s.scalar(select(func.count()).select_from(Job)) + s.scalar(
            select(func.count()).select_from(DocumentFile)
        )


@pytest.mark.parametrize(("name", "content", "status", "code", "says"), CASES)
def test_bad_documents_are_refused(app, client, auth, name, content, status, code, says):
    good = ("fine.txt", b"The dog sleeps.\n")
    response = upload(client, auth, [good, (name, content)])
    error = response.get_json()["error"]
    assert (response.status_code, error["code"]) == (status, code), error
    assert says in error["message"]
    assert name in error["message"]
    assert "root:" not in error["message"]  # nothing of /etc/passwd leaked
    assert stored(app) == 0


def test_a_network_dtd_is_never_fetched():
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'<!ENTITY x "fetched">')

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/x.dtd"
    body = (
        f'<?xml version="1.0"?>\n<!DOCTYPE xliff SYSTEM "{url}">\n'
        '<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file><body>'
        '<trans-unit id="1"><source>&x;</source></trans-unit></body></file></xliff>'
    ).encode()
    part = docx([run("Hello.")])
    with pytest.raises(Exception, match="DOCTYPE"):
        parse_document("net.xlf", body, Limits())
    with pytest.raises(Exception, match="DOCTYPE"):
        parse_document("net.docx", _with_part(part, "word/document.xml", body), Limits())
    server.shutdown()
    assert hits == []


def _with_part(doc: bytes, name: str, content: bytes) -> bytes:
    src = zipfile.ZipFile(io.BytesIO(doc))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            z.writestr(info, content if info.filename == name else src.read(info.filename))
    return out.getvalue()


def test_a_zip_bomb_is_refused_before_it_unpacks(app, client, auth):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b"<w:document/>")
        with z.open("word/bomb.bin", "w") as member:  # 300 MiB of zeros, ~300 KB packed
            chunk = bytes(1 << 20)
            for _ in range(300):
                member.write(chunk)
    bomb = out.getvalue()
    assert len(bomb) < 1_000_000
    response = upload(client, auth, [("bomb.docx", bomb)])
    assert response.status_code == 413
    assert response.get_json()["error"]["code"] == "document_too_large"
    assert "unpacks to 314572813 bytes" in response.get_json()["error"]["message"]
    assert stored(app) == 0


def test_too_many_zip_entries_are_refused():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("word/document.xml", b"<w:document/>")
        for i in range(20):
            z.writestr(f"media/{i}.bin", b"x")
    with pytest.raises(FormatError, match="21 entries; the limit is 10"):
        Zip(out.getvalue(), Limits(max_zip_entries=10))


def test_an_entry_larger_than_it_says_stops_at_the_limit():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("big.bin", bytes(5000))
    container = Zip(out.getvalue(), Limits(max_unpacked_bytes=10_000))
    container.left = 1000  # as if earlier entries had used the rest
    with pytest.raises(FormatError, match="more than the limit"):
        container.read("big.bin")


def test_too_many_segments_in_one_document():
    srt = b"".join(f"{i}\n00:00:01,000 --> 00:00:02,000\nHi.\n\n".encode() for i in range(1, 12))
    with pytest.raises(Exception, match="more than 10 cues; that is the limit") as info:
        parse_document("subs.srt", srt, Limits(max_segments=10))
    assert getattr(info.value, "status", None) == 413


@pytest.mark.parametrize(
    ("name", "content"),
    [
        (
            "fr.xlf",
            XLIFF12.replace(b'source-language="en"', b'source-language="en" target-language="fr"'),
        ),
        ("fr2.xlf", XLIFF2.replace(b'srcLang="en"', b'srcLang="en" trgLang="fr"')),
    ],
)
def test_an_xliff_for_another_target_language_is_refused(app, client, auth, name, content):
    before = stored(app)
    response = upload(client, auth, [(name, content)])
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["code"] == "language_mismatch"
    assert "'fr'" in error["message"] and "'de'" in error["message"]
    assert stored(app) == before


def test_an_xliff_for_a_regional_variant_of_the_target_is_accepted(client, auth):
    content = XLIFF2.replace(b'srcLang="en"', b'srcLang="en-US" trgLang="de-AT"')
    assert upload(client, auth, [("at.xlf", content)]).status_code == 202
