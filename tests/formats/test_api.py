"""Uploading documents in their own formats and downloading them translated, over the API.

The targets are written straight into the segment rows here (as a worker would), so
these tests are about storage and result assembly; tests/formats/test_worker_e2e.py
runs a real worker on the demo model.
"""

from __future__ import annotations

import io
import zipfile

import polib
from lxml import etree
from sqlalchemy import select, update

from stapel.states import Status
from stapel.tables import DocumentFile, Job, Segment
from tests.formats.samples import HTML, PO, SRT, XLIFF12
from tests.formats.test_bad_input import upload

FILES = [
    ("ui.xlf", XLIFF12),
    ("app.po", PO),
    ("page.html", HTML),
    ("subs.srt", SRT),
    ("notes.txt", b"The dog sleeps.\nThe cat sleeps.\n"),
]


def submit(client, auth, **form) -> str:
    response = upload(client, auth, FILES, **form)
    assert response.status_code == 202, response.get_json()
    return response.get_json()["id"]


def finish(app, job_id: str, translate=lambda s: s) -> None:
    """Write every segment's target as a worker would, and end the job."""
    with app.extensions["stapel"].sessions() as s:
        for idx, source in s.execute(
            select(Segment.idx, Segment.source).where(Segment.job_id == job_id)
        ):
            s.execute(
                update(Segment)
                .where(Segment.job_id == job_id, Segment.idx == idx)
                .values(target=translate(source))
            )
        s.execute(update(Job).where(Job.id == job_id).values(status=Status.SUCCEEDED))
        s.commit()


def test_mixed_upload_stores_each_document_with_its_format(app, client, auth):
    job_id = submit(client, auth, mark_fuzzy="false")
    with app.extensions["stapel"].sessions() as s:
        rows = s.execute(
            select(DocumentFile.idx, DocumentFile.format, DocumentFile.options).where(
                DocumentFile.job_id == job_id
            )
        ).all()
        total = s.get(Job, job_id).segments_total
    # The .txt file keeps its layout (line endings, BOM) to be rebuilt byte for byte.
    assert [(i, f) for i, f, _ in rows] == [
        (0, "xliff"),
        (1, "po"),
        (2, "html"),
        (3, "srt"),
        (4, "txt"),
    ]
    assert rows[1][2] == {"overwrite_targets": False, "mark_fuzzy": False}
    assert total == 2 + 4 + 6 + 3 + 2


def test_files_come_back_in_their_own_formats(app, client, auth):
    job_id = submit(client, auth)
    partial = client.get(f"/v1/jobs/{job_id}/result?format=file&document=2", headers=auth)
    assert partial.headers["X-Stapel-Complete"] == "false"
    assert partial.data == HTML  # nothing translated yet: the page as it came
    finish(app, job_id)
    response = client.get(f"/v1/jobs/{job_id}/result?format=file", headers=auth)
    assert response.mimetype == "application/zip"
    assert f"filename={job_id}.zip" in response.headers["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(response.data))
    assert archive.namelist() == [name for name, _ in FILES]
    assert archive.read("page.html") == HTML  # identity: byte for byte
    assert archive.read("subs.srt") == SRT
    assert archive.read("notes.txt") == b"The dog sleeps.\nThe cat sleeps.\n"
    po = polib.pofile(archive.read("app.po").decode())
    assert (
        po.find("The old man sees %s the small dog.").msgstr == "The old man sees %s the small dog."
    )
    one = client.get(f"/v1/jobs/{job_id}/result?format=file&document=0", headers=auth)
    assert one.mimetype == "application/xliff+xml"
    assert one.headers["Content-Disposition"] == "attachment; filename=ui.xlf"
    assert b'<target state="needs-review-translation"' in one.data
    missing = client.get(f"/v1/jobs/{job_id}/result?format=file&document=9", headers=auth)
    assert missing.status_code == 404


def test_any_job_as_xliff_21_and_tmx(app, client, auth):
    job_id = submit(client, auth)
    finish(app, job_id, lambda s: s.upper())
    xliff = etree.fromstring(
        client.get(f"/v1/jobs/{job_id}/result?format=xliff", headers=auth).data
    )
    assert (xliff.get("version"), xliff.get("srcLang"), xliff.get("trgLang")) == ("2.1", "en", "de")
    files = xliff.findall("{*}file")
    assert [f.get("original") for f in files] == [name for name, _ in FILES]
    first = files[0].find("{*}unit/{*}segment")
    assert first.get("state") == "translated"
    assert etree.tostring(first.find("{*}target"), encoding="unicode", with_tail=False).endswith(
        'THE <pc id="1">OLD MAN</pc> SEES THE SMALL DOG.</target>'
    )
    tmx = etree.fromstring(client.get(f"/v1/jobs/{job_id}/result?format=tmx", headers=auth).data)
    units = tmx.findall("{*}body/{*}tu")
    assert len(units) == 17
    seg = units[0].findall("{*}tuv")[1].find("{*}seg")
    assert etree.tostring(seg, encoding="unicode", with_tail=False) == (
        '<seg>THE <bpt i="1"/>OLD MAN<ept i="1"/> SEES THE SMALL DOG.</seg>'
    )


def test_json_result_shows_codes_readably(app, client, auth):
    job_id = submit(client, auth)
    finish(app, job_id)
    body = client.get(f"/v1/jobs/{job_id}/result", headers=auth).get_json()
    assert body["documents"][0]["segments"][0] == "The <1>old man</1> sees the small dog."
    assert client.get(f"/v1/jobs/{job_id}/result?format=nope", headers=auth).status_code == 400


def test_json_documents_come_back_as_text_files_with_safe_names(app, client, auth):
    body = {
        "source_lang": "en",
        "target_lang": "de",
        "documents": [
            {"id": "../../etc/cron.d/x", "segments": ["The dog sleeps."]},
            {"id": "intro", "segments": ["The cat sleeps.", ""]},
            {"segments": ["The cat."]},
        ],
    }
    job_id = client.post("/v1/jobs", json=body, headers=auth).get_json()["id"]
    finish(app, job_id, str.upper)
    archive = zipfile.ZipFile(
        io.BytesIO(client.get(f"/v1/jobs/{job_id}/result?format=file", headers=auth).data)
    )
    assert archive.namelist() == ["_.._etc_cron.d_x", "intro.txt", "document-3.txt"]
    assert archive.read("intro.txt") == b"THE CAT SLEEPS.\n\n"


def test_files_carry_each_segments_score_and_review(app, client, auth):
    job_id = submit(client, auth, min_score="0.6", mark_fuzzy="false")
    finish(app, job_id)
    with app.extensions["stapel"].sessions() as s:  # XLIFF's two, then PO's four segments
        for idx, score in enumerate([0.9, 0.4, 0.8, 0.3, 0.7, 0.95]):
            s.execute(
                update(Segment)
                .where(Segment.job_id == job_id, Segment.idx == idx)
                .values(score=score, review=score < 0.6)
            )
        s.commit()
    xliff = client.get(f"/v1/jobs/{job_id}/result?format=file&document=0", headers=auth)
    root = etree.fromstring(xliff.data)
    ns = {"x": "urn:oasis:names:tc:xliff:document:1.2"}
    kept, review = (root.find(f".//x:trans-unit[@id='{i}']", ns) for i in ("1", "5"))
    assert kept.find("x:alt-trans", ns).get("match-quality") == "90.0"
    assert kept.find("x:target", ns).get("state") == "translated"
    assert review.find("x:alt-trans", ns) is None  # its target is not the scored one
    assert review.find("x:target", ns).get("state") == "needs-review-translation"
    po = polib.pofile(
        client.get(f"/v1/jobs/{job_id}/result?format=file&document=1", headers=auth).data.decode()
    )
    entries = [e for e in po if e.msgstr or e.msgstr_plural]
    scored = {e.msgid: (e.tcomment, "fuzzy" in e.flags) for e in entries if e.tcomment}
    assert scored == {
        "The old man sees %s the small dog.": ("stapel-score: 0.80", False),
        "%(count)d dog sleeps.": ("stapel-score: 0.30", True),  # its plural text's score
        "We have bought {name} a new car.": ("stapel-score: 0.95", False),
    }
