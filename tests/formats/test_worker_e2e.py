"""End to end: tagged documents uploaded, translated by a real worker on the demo model.

The web stores an XLIFF file, a PO file and a Word document; a real Celery worker
process (STAPEL_MODEL_ROOT: the committed demo models) translates them through its
aligning batcher; the result downloads as a zip of the three files, tags in place.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import polib
import pytest
from lxml import etree

from tests.factories import wait_for
from tests.formats.samples import PO, XLIFF12, docx, run, sample_docx
from tests.formats.test_bad_input import upload
from tests.workers_proc import stack_worker

pytestmark = pytest.mark.e2e
MODELS = Path(__file__).resolve().parents[2] / "models"
X1 = "urn:oasis:names:tc:xliff:document:1.2"


@pytest.fixture
def worker(app, settings_overrides, tmp_path):
    yield from stack_worker(
        app, settings_overrides, tmp_path, STAPEL_MODEL_ROOT=str(MODELS), STAPEL_THREADS="1"
    )


def translated(client, auth, worker, files) -> tuple[dict, dict, zipfile.ZipFile]:
    """Upload files as one job, wait for it to succeed; return (job, status, result zip)."""
    created = upload(client, auth, files)
    assert created.status_code == 202, created.get_json()
    job = created.get_json()

    def finished():
        state = client.get(job["links"]["self"], headers=auth).get_json()
        return state if state["status"] in ("succeeded", "failed") else None

    done = wait_for(finished, timeout=120, what="the job to finish")
    assert done["status"] == "succeeded", (done, worker.log())
    response = client.get(f"{job['links']['result']}?format=file", headers=auth)
    return job, done, zipfile.ZipFile(io.BytesIO(response.data))


def test_documents_with_tags_come_back_translated(client, auth, worker):
    files = [("ui.xlf", XLIFF12), ("app.po", PO), ("letter.docx", sample_docx())]
    archive = translated(client, auth, worker, files)[2]
    xliff = archive.read("ui.xlf").decode()
    assert 'Der <g id="1">alte Mann</g> sieht den kleinen Hund.</target>' in xliff
    assert 'Der <bpt id="5">&lt;b&gt;</bpt>Hund<ept id="5">&lt;/b&gt;</ept> schläft.' in xliff
    po = polib.pofile(archive.read("app.po").decode())
    assert po.find("The old man sees %s the small dog.").msgstr == (
        "Der alte Mann sieht %s den kleinen Hund."
    )
    word = zipfile.ZipFile(io.BytesIO(archive.read("letter.docx")))
    assert "<w:rPr><w:b/></w:rPr><w:t>alte Mann</w:t>" in word.read("word/document.xml").decode()
    # each translated segment's score, as the worker stored it, in the file's own terms
    qualities = [
        float(alt.get("match-quality"))
        for alt in etree.fromstring(archive.read("ui.xlf")).iter(f"{{{X1}}}alt-trans")
    ]
    assert len(qualities) == 2 and all(0 < q <= 100 for q in qualities)
    comments = [e.tcomment for e in po if "fuzzy" in e.flags]  # the entries Stapel wrote
    assert len(comments) == 3 and all(c.startswith("stapel-score: 0.") for c in comments)


def test_tagged_documents_sent_again_come_from_the_cache_tags_in_place(app, client, auth, worker):
    """A segment with inline codes is cached whole, its codes placed: the second upload
    takes its tagged segments from the cache, the third is answered whole at submit."""
    files = [("ui.xlf", XLIFF12), ("app.po", PO)]

    def send() -> tuple[dict, dict, dict[str, bytes]]:
        job, done, archive = translated(client, auth, worker, files)
        return job, done, {name: archive.read(name) for name in archive.namelist()}

    _, first, cold = send()
    _, second, warm = send()
    assert warm == cold
    assert first["segments_from_cache"] == 0
    ext = app.extensions["stapel"]
    wait_for(lambda: ext.served.get().fingerprints.get("cpu.en-de"), timeout=30, what="presence")
    job, third, hot = send()
    assert job["status"] == "succeeded"  # answered at submit: every segment cached whole
    assert hot == cold and third["segments_from_mt"] == second["segments_from_mt"] == 0
    assert (
        first["segments_from_mt"] == second["segments_from_cache"] == third["segments_from_cache"]
    )


def test_a_bookmark_inside_a_word_keeps_the_job_and_the_bookmark(client, auth, worker):
    bookmark = '<w:bookmarkStart w:id="0" w:name="mark"/><w:bookmarkEnd w:id="0"/>'
    doc = docx([run("Para") + bookmark + run("graph"), run("The old man sees the small dog.")])
    body = translated(client, auth, worker, [("mark.docx", doc)])[2].read("word/document.xml")
    assert body.decode().count(bookmark) == 1
