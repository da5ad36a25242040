"""Documents through the DeepL dialect with the official `deepl` client and CLI: every
type comes back in its own format, as /v1 renders the same file, and what cannot be
served is refused at upload."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile

import deepl
import docx as python_docx
import pytest
import requests
from lxml import etree

from tests.factories import wait_for
from tests.formats.samples import HTML, PO, SRT, XLIFF2, XLIFF12, sample_docx
from tests.test_e2e import raw_translate

pytestmark = pytest.mark.e2e

GERMAN = "Der alte Mann sieht den kleinen Hund und die Frau liest ein Buch."
DOCUMENTS = {
    "ui.xlf": XLIFF12,
    "ui2.xlf": XLIFF2,
    "app.po": PO,
    "film.srt": SRT,
    "page.html": HTML,
    "letter.docx": sample_docx(),
}
MEDIA = {
    "xlf": "application/xliff+xml",
    "po": "text/x-gettext-translation",
    "srt": "application/x-subrip",
    "html": "text/html; charset=utf-8",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "txt": "text/plain; charset=utf-8",
}


@pytest.fixture(scope="module")
def translator(live, live_key):
    return deepl.Translator(live_key, server_url=f"{live}/deepl/")


def through_v1(
    live: str, key: str, name: str, content: bytes, source: str = "en", target: str = "de"
) -> bytes:
    """The same file translated by /v1: its result file."""
    created = requests.post(
        f"{live}/v1/jobs",
        data={"source_lang": source, "target_lang": target},
        files={"files": (name, content)},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    assert created.status_code == 202, created.text
    job = created.json()

    def finished():
        state = requests.get(
            f"{live}{job['links']['self']}", headers={"Authorization": f"Bearer {key}"}, timeout=30
        ).json()
        return state if state["status"] in ("succeeded", "failed") else None

    assert wait_for(finished, timeout=120, what="the /v1 job")["status"] == "succeeded"
    result = requests.get(
        f"{live}{job['links']['result']}?format=file",
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    return result.content


def through_deepl(live: str, key: str, name: str, content: bytes, **form) -> requests.Response:
    """Upload, wait and download with plain HTTP, to see the result's headers."""
    auth = {"Authorization": f"DeepL-Auth-Key {key}"}
    fields = {"target_lang": "DE", "source_lang": "EN", **form}
    up = requests.post(
        f"{live}/deepl/v2/document", data=fields, files={"file": (name, content)}, headers=auth
    )
    assert up.status_code == 200, up.text
    handle = up.json()

    def done():
        state = requests.post(
            f"{live}/deepl/v2/document/{handle['document_id']}",
            data={"document_key": handle["document_key"]},
            headers=auth,
        ).json()
        return state if state["status"] in ("done", "error") else None

    assert wait_for(done, timeout=120, what="the document")["status"] == "done"
    return requests.post(
        f"{live}/deepl/v2/document/{handle['document_id']}/result",
        data={"document_key": handle["document_key"]},
        headers=auth,
    )


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_a_document_comes_back_in_its_own_format_as_v1_makes_it(
    translator, live, live_key, name, tmp_path
):
    source, target = tmp_path / name, tmp_path / f"out-{name}"
    source.write_bytes(DOCUMENTS[name])
    status = translator.translate_document_from_filepath(
        source, target, source_lang="EN", target_lang="DE"
    )
    assert status.done
    out = target.read_bytes()
    assert out == through_v1(live, live_key, name, DOCUMENTS[name])
    assert not inline_markers(out)
    if name.endswith(".docx"):
        python_docx.Document(io.BytesIO(out))
        assert zipfile.ZipFile(io.BytesIO(out)).testzip() is None
    elif name.endswith((".xlf", ".html")):
        etree.fromstring(out, etree.HTMLParser() if name.endswith(".html") else None)


def inline_markers(data: bytes) -> bool:
    """Whether Stapel's marker characters leaked into a file (or any of a zip's parts)."""
    if data.startswith(b"PK"):
        archive = zipfile.ZipFile(io.BytesIO(data))
        return any(inline_markers(archive.read(n)) for n in archive.namelist())
    return any(c in data.decode("utf-8", "replace") for c in "\ufdd0\ufdd1\ufdd2\ufdd3")


def test_the_result_has_its_formats_content_type(live, live_key):
    for name in ("letter.docx", "film.srt"):
        result = through_deepl(live, live_key, name, DOCUMENTS[name])
        assert result.status_code == 200
        assert result.headers["Content-Type"] == MEDIA[name.rsplit(".", 1)[1]]
        # read whole before the status: a cut cannot pass for the end of the file
        assert result.headers["Content-Length"] == str(len(result.content))
        assert (
            f'filename="{name}"' in result.headers["Content-Disposition"]
            or name in (result.headers["Content-Disposition"])
        )


@pytest.mark.parametrize(
    "content",
    [
        b"The old man sees the small dog.\nThe woman reads a book.",  # no final newline
        b"The old man sees the small dog.\r\nThe woman reads a book.\r\n",  # CRLF
        b"\xef\xbb\xbfThe old man sees the small dog.\n\nThe woman reads a book.\n",  # BOM
        b"The old man sees the small dog.\r\nThe woman reads a book.\n",  # mixed
    ],
)
def test_a_text_document_keeps_its_bytes_outside_the_lines(live, live_key, model_root, content):
    lines = ["The old man sees the small dog.", "The woman reads a book."]
    a, b = raw_translate(model_root / "en-de", lines)
    expected = content.replace(lines[0].encode(), a.encode()).replace(lines[1].encode(), b.encode())
    result = through_deepl(live, live_key, "notes.txt", content)
    assert result.content == expected
    assert result.headers["Content-Type"] == MEDIA["txt"]
    assert through_v1(live, live_key, "notes.txt", content) == expected


def test_an_unsupported_type_is_refused_at_upload_in_deepls_words(translator, tmp_path):
    pdf = tmp_path / "scan.pdf"
    pdf.write_bytes(b"%PDF-1.4\n%...\n")
    with pytest.raises(deepl.DeepLException) as raised:
        translator.translate_document_from_filepath(pdf, tmp_path / "out.pdf", target_lang="DE")
    message = str(raised.value)
    assert "Invalid file" in message and "file extension" in message
    assert not isinstance(raised.value, deepl.DocumentTranslationException)  # never uploaded


def test_a_document_in_the_target_language_is_refused(translator, tmp_path):
    source = tmp_path / "brief.txt"
    source.write_text(GERMAN + "\n")
    with pytest.raises(deepl.DeepLException, match="Source and target language are equal"):
        translator.translate_document_from_filepath(source, tmp_path / "out.txt", target_lang="DE")


def test_a_documents_language_is_detected_from_its_words(translator, tmp_path, model_root):
    source = tmp_path / "brief.docx"
    source.write_bytes(sample_docx())  # English words inside Word's XML
    status = translator.translate_document_from_filepath(
        source, tmp_path / "o.docx", target_lang="DE"
    )
    assert status.done
    python_docx.Document(str(tmp_path / "o.docx"))


def test_detected_source_language_is_each_texts(translator, model_root):
    german, english = translator.translate_text(
        [GERMAN, "The old man sees the small dog."], target_lang="DE"
    )
    assert german.detected_source_lang == "DE" and german.text == GERMAN  # already German
    assert english.detected_source_lang == "EN"
    assert (
        english.text == raw_translate(model_root / "en-de", ["The old man sees the small dog."])[0]
    )


def test_model_type_used_is_answered(translator):
    result = translator.translate_text(
        "Hallo Welt.", source_lang="DE", target_lang="EN-GB", model_type="prefer_quality_optimized"
    )
    assert result.model_type_used == "quality_optimized"


def cli(live: str, key: str, *args: str) -> subprocess.CompletedProcess:
    """The official CLI with its default options."""
    command = [sys.executable, "-m", "deepl", "--auth-key", key, "--server-url", f"{live}/deepl/"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)


def test_the_cli_translates_html_with_its_default_outline_detection(live, live_key):
    run = cli(
        live,
        live_key,
        "text",
        "--from",
        "EN",
        "--to",
        "DE",
        "--tag-handling",
        "html",
        "<p>The old <b>man</b> sleeps.</p>",
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().startswith("<p>") and "<b>" in run.stdout


def test_the_cli_shows_the_model_type_used(live, live_key):
    run = cli(
        live,
        live_key,
        "text",
        "--from",
        "DE",
        "--to",
        "EN-GB",
        "--show-model-type-used",
        "Hallo Welt.",
    )
    assert run.returncode == 0, run.stderr
    assert "Model type used: latency_optimized" in run.stdout


def test_the_cli_translates_a_document(live, live_key, tmp_path):
    source = tmp_path / "film.srt"
    source.write_bytes(SRT)
    out = tmp_path / "out"
    out.mkdir()
    run = cli(live, live_key, "document", "--from", "EN", "--to", "DE", str(source), str(out))
    assert run.returncode == 0, run.stderr
    assert (out / "film.srt").read_bytes() == through_v1(live, live_key, "film.srt", SRT)
